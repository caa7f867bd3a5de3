package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// structuredPerson is the schema the structured-output tests ask for.
const structuredPerson = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},"required":["name","age","tags"],"additionalProperties":false}`

func validatePerson(t *testing.T, text string) {
	t.Helper()
	schematest.Check(t, "the answer", text, structuredPerson)
}

// TestStructuredOutputModes: a chat with a json_schema response format
// answers JSON of the schema, the same text whole and streamed, in whole
// and disagg modes; a keyword the engines cannot honour is a 400 naming it.
func TestStructuredOutputModes(t *testing.T) {
	var texts []string
	for _, mode := range []string{"whole", "disagg"} {
		s := startSite(t, 2, "\t\t\tmode "+mode+"\n")
		body := map[string]any{"model": "tiny", "max_tokens": 200, "temperature": 0,
			"messages":        []map[string]any{{"role": "user", "content": "the cat sat on"}},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "strict": true, "schema": json.RawMessage(structuredPerson)}}}
		var chat protocol.ChatCompletionResponse
		mustUnmarshal(t, post(t, s.base+protocol.PathChatCompletions, body, http.StatusOK), &chat)
		text := chat.Choices[0].Message.Content
		validatePerson(t, text)
		if chat.Choices[0].FinishReason == nil || *chat.Choices[0].FinishReason != protocol.FinishStop {
			t.Errorf("%s: finish %v", mode, chat.Choices[0].FinishReason)
		}
		texts = append(texts, text)
		body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "schema": map[string]any{"type": "array", "contains": map[string]any{}, "maxContains": 1}}}
		var eb protocol.ErrorBody
		mustUnmarshal(t, post(t, s.base+protocol.PathChatCompletions, body, http.StatusBadRequest), &eb)
		if eb.Error == nil || eb.Error.Param == nil || *eb.Error.Param != "response_format.json_schema.schema.maxContains" {
			t.Errorf("%s: unsupported keyword: %+v", mode, eb.Error)
		}
	}
	if texts[0] != texts[1] {
		t.Errorf("whole %q, disagg %q", texts[0], texts[1])
	}
}

// structuredSDK parses a chat answer with the openai SDK's
// beta.chat.completions.parse and a json_schema format, whole and
// through its stream helper, and a Responses answer with text.format.
const structuredSDK = `
const OpenAI = require("openai");
(async () => {
  const client = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "k", maxRetries: 0 });
  const schema = JSON.parse(process.env.SCHEMA);
  const params = { model: "tiny", max_tokens: 200, temperature: 0, messages: [{ role: "user", content: "the cat sat on" }],
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema } } };
  const whole = await client.beta.chat.completions.parse(params);
  const stream = client.beta.chat.completions.stream(params);
  const final = await stream.finalChatCompletion();
  const resp = await client.responses.create({ model: "tiny", input: "the cat sat on", max_output_tokens: 200, temperature: 0,
    text: { format: { type: "json_schema", name: "person", strict: true, schema } } });
  console.log(JSON.stringify({ parsed: whole.choices[0].message.parsed, text: whole.choices[0].message.content,
    streamed: final.choices[0].message.content, response: resp.output_text, format: resp.text.format.type }));
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestStructuredOutputOpenAISDK: the official openai SDK gets parsed
// objects of the schema through the router.
func TestStructuredOutputOpenAISDK(t *testing.T) {
	s := startSite(t, 2, "")
	var got struct {
		Parsed                   map[string]any
		Text, Streamed, Response string
		Format                   string
	}
	mustUnmarshal(t, npmref.NodeScript(t, structuredSDK, "BASE="+s.base, "SCHEMA="+structuredPerson), &got)
	validatePerson(t, got.Text)
	validatePerson(t, got.Response)
	if got.Parsed == nil || got.Parsed["name"] == nil || got.Streamed != got.Text || got.Format != "json_schema" {
		t.Errorf("SDK: %+v", got)
	}
}

// TestStructuredOutputPreemptionStorm: constrained streams on engines
// with a tiny KV pool are preempted and resumed by the router (disagg),
// and each client gets the text one pass gives, JSON of the schema.
func TestStructuredOutputPreemptionStorm(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n\t\t\tengine_args --overrides max_total_seq_length=512;max_num_sequence=64;prefill_chunk_size=64\n\t\t\tmax_attempts 64\n")
	const clients = 24
	format := map[string]any{"type": "json_object", "schema": structuredPerson}
	body := func(i int) map[string]any {
		b := greedy(fmt.Sprintf("record number %d of the %s archive", i, []string{"green", "cold", "long"}[i%3]), 120)
		b["response_format"] = format
		return b
	}
	want := make([]string, clients)
	for i := range want {
		want[i] = reference(s, s.engines[1], body(i))
		validatePerson(t, want[i])
	}
	before := engineMetrics(t, s.engines[1])["preemptions"]
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			st, err := s.stream(context.Background(), s.base, body(i))
			switch {
			case err != nil:
				errs <- fmt.Errorf("client %d: %w", i, err)
			case st.text != want[i] || st.finish != protocol.FinishStop:
				errs <- fmt.Errorf("client %d: %q (%s), want %q", i, st.text, st.finish, want[i])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if after := engineMetrics(t, s.engines[1])["preemptions"]; after <= before {
		t.Errorf("no preemption (%v before, %v after): the test did not test resumption", before, after)
	}
}
