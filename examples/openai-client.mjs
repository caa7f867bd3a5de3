// An OpenAI SDK client (npm "openai") against the router: a completion, a
// streamed completion and a streamed chat completion. It exits non-zero if
// anything looks wrong, so CI can run it against the main job.
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

let answer = "";
const chat = await client.chat.completions.create({
  model: "tiny", messages: [{ role: "user", content: "tell me about the river" }],
  max_tokens: 10, temperature: 0, stream: true,
});
for await (const chunk of chat) answer += chunk.choices[0]?.delta?.content ?? "";
console.log("chat:      ", JSON.stringify(answer));
assert.ok(answer.length > 0, "empty chat answer");

const models = await client.models.list();
assert.equal(models.data[0].id, "tiny");
console.log("openai client example: ok");
