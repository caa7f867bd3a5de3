package caddymlc

import (
	"net/http"
	"slices"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// openAIResponses is a client of the official openai SDK's Responses
// API: a response created whole (its output_text is the SDK's
// convenience), the same streamed (its events), and the error of an
// unsupported tool.
const openAIResponses = `
const OpenAI = require("openai");
(async () => {
  const client = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "unused", maxRetries: 0 });
  const params = { model: "tiny", instructions: "You answer in one line.", input: "the cat sat on",
    max_output_tokens: 12, temperature: 0 };
  const whole = await client.responses.create(params);
  const events = [];
  let streamed = "", final = null;
  for await (const e of await client.responses.create({ ...params, stream: true })) {
    events.push({ type: e.type, seq: e.sequence_number });
    if (e.type === "response.output_text.delta") streamed += e.delta;
    if (e.type === "response.completed" || e.type === "response.incomplete") final = e.response;
  }
  let tools = null;
  try { await client.responses.create({ ...params, tools: [{ type: "function", name: "f", parameters: {} }] }); }
  catch (e) { tools = { status: e.status, param: e.param, message: e.message }; }
  console.log(JSON.stringify({ whole, events, streamed, final, tools }));
})().catch((e) => { console.error(e); process.exit(1); });
`

// sdkResponse is what the tests read of a response the SDK returned.
type sdkResponse struct {
	ID, Status string
	OutputText string `json:"output_text"`
	Output     []protocol.ResponseMessage
	Usage      protocol.ResponseUsage
}

// The official openai SDK's responses.create, whole and streamed, works
// unchanged against the site: the text is the chat completion's for the
// same conversation (greedy), cut by max_output_tokens as incomplete; the
// stream's events are OpenAI's, numbered from 0.
func TestResponsesOpenAISDK(t *testing.T) {
	s := startSite(t, 2, "")
	var got struct {
		Whole, Final sdkResponse
		Events       []struct {
			Type string
			Seq  int
		}
		Streamed string
		Tools    struct {
			Status         int
			Param, Message string
		}
	}
	mustUnmarshal(t, npmref.NodeScript(t, openAIResponses, "BASE="+s.base), &got)
	want, usage := greedyChat(t, s.base, 12, []map[string]any{{"role": "system", "content": "You answer in one line."}, {"role": "user", "content": "the cat sat on"}})
	if w := got.Whole; w.OutputText != want || w.Status != "incomplete" || len(w.Output) != 1 || w.Output[0].Text() != want ||
		w.Usage.InputTokens != usage.PromptTokens || w.Usage.OutputTokens != usage.CompletionTokens {
		t.Errorf("whole: %+v, want %q and %+v", w, want, usage)
	}
	if got.Streamed != want || got.Final.Status != "incomplete" || got.Final.Output[0].Text() != want {
		t.Errorf("streamed %q, final %+v, want %q", got.Streamed, got.Final, want)
	}
	var names []string
	for i, e := range got.Events {
		if e.Seq != i {
			t.Fatalf("event %d (%s): sequence_number %d", i, e.Type, e.Seq)
		}
		if n := len(names); n == 0 || names[n-1] != e.Type || e.Type != "response.output_text.delta" {
			names = append(names, e.Type)
		}
	}
	if w := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"}; !slices.Equal(names, w) {
		t.Errorf("events %v, want %v", names, w)
	}
	if got.Tools.Status != http.StatusBadRequest || got.Tools.Param != "tools" {
		t.Errorf("tools: %+v", got.Tools)
	}
}

// greedyChat is the greedy chat completion of messages: its text and usage.
func greedyChat(t *testing.T, base string, maxTokens int, messages []map[string]any) (string, protocol.Usage) {
	t.Helper()
	var chat protocol.ChatCompletionResponse
	mustUnmarshal(t, post(t, base+protocol.PathChatCompletions, map[string]any{"model": "tiny", "max_tokens": maxTokens, "temperature": 0,
		"messages": messages}, http.StatusOK), &chat)
	return chat.Choices[0].Message.Content, *chat.Usage
}
