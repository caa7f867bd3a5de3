// An OpenAI SDK client (npm "openai") against the router: completions and
// chat completions, whole and streamed, with logprobs; the model list and
// the served model; and the errors the SDK maps to its classes (an unknown
// model, a bad request). It exits non-zero if anything looks wrong, so CI
// can run it against the main job.
//
//   npm install openai && BASE=http://localhost:8000 node examples/openai-client.mjs
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({
  baseURL: (process.env.BASE ?? "http://localhost:8000") + "/v1",
  apiKey: process.env.OPENAI_API_KEY ?? "unused",
});

const whole = await client.completions.create({
  model: "tiny", prompt: "the cat sat on the", max_tokens: 12, temperature: 0,
});
console.log("completion:", JSON.stringify(whole.choices[0].text), whole.usage);
assert.equal(whole.choices[0].finish_reason, "length");
assert.equal(whole.usage.completion_tokens, 12);

let streamed = "";
const stream = await client.completions.create({
  model: "tiny", prompt: "the cat sat on the", max_tokens: 12, temperature: 0, stream: true,
});
for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? "";
console.log("streamed:  ", JSON.stringify(streamed));
assert.equal(streamed, whole.choices[0].text, "streamed text differs from the whole completion");

// logprobs: each token's log probability and its 2 most likely alternatives.
const withLogprobs = await client.completions.create({
  model: "tiny", prompt: "the cat sat on the", max_tokens: 12, temperature: 0, logprobs: 2,
});
const lp = withLogprobs.choices[0].logprobs;
console.log("logprobs:  ", JSON.stringify(lp.tokens.slice(0, 4)), lp.token_logprobs.slice(0, 4));
assert.equal(withLogprobs.choices[0].text, whole.choices[0].text);
assert.equal(lp.tokens.length, 12);
assert.equal(lp.tokens.join(""), whole.choices[0].text);
assert.ok(lp.token_logprobs.every((x) => x <= 0), "a log probability above 0");
assert.ok(lp.top_logprobs.every((top) => Object.keys(top).length === 2), "not 2 alternatives per token");
assert.deepEqual(lp.text_offset.slice(0, 2), [0, lp.tokens[0].length]);

let answer = "";
const chat = await client.chat.completions.create({
  model: "tiny", messages: [{ role: "user", content: "tell me about the river" }],
  max_tokens: 10, temperature: 0, stream: true,
});
for await (const chunk of chat) answer += chunk.choices[0]?.delta?.content ?? "";
console.log("chat:      ", JSON.stringify(answer));
assert.ok(answer.length > 0, "empty chat answer");

const chatLogprobs = await client.chat.completions.create({
  model: "tiny", messages: [{ role: "user", content: "tell me about the river" }],
  max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 3,
});
const content = chatLogprobs.choices[0].logprobs.content;
console.log("chat logprobs:", content.length, "tokens, first", JSON.stringify(content[0]));
assert.equal(chatLogprobs.choices[0].message.content, answer);
assert.equal(content.map((c) => c.token).join(""), answer);
assert.ok(content.every((c) => c.top_logprobs.length === 3), "not 3 alternatives per token");
assert.equal(chatLogprobs.system_fingerprint, "caddy-mlc");

const models = await client.models.list();
assert.equal(models.data[0].id, "tiny");
const model = await client.models.retrieve("tiny");
assert.equal(model.id, "tiny");
assert.equal(model.object, "model");

// Errors come as the SDK's classes, with OpenAI's code and param.
await assert.rejects(
  client.completions.create({ model: "gpt-4o", prompt: "hi", max_tokens: 1 }),
  (err) => err instanceof OpenAI.NotFoundError && err.code === "model_not_found" && err.param === "model",
);
await assert.rejects(client.models.retrieve("gpt-4o"), OpenAI.NotFoundError);
await assert.rejects(
  client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "hi" }], temperature: 5 }),
  (err) => err instanceof OpenAI.BadRequestError && err.code === "decimal_above_max_value" && err.param === "temperature",
);
console.log("errors:     NotFoundError for an unknown model, BadRequestError for temperature 5");
console.log("openai client example: ok");
