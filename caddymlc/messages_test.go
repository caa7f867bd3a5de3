package caddymlc

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// anthropicMessages is a client of the official Anthropic SDK: a message
// created whole, the same streamed through messages.stream (its events,
// its text and its final message), and the errors of a request without
// max_tokens and of an unknown model.
const anthropicMessages = `
const Anthropic = require("@anthropic-ai/sdk");
(async () => {
  const client = new Anthropic({ baseURL: process.env.BASE, apiKey: "unused", maxRetries: 0 });
  const params = { model: "tiny", max_tokens: 12, temperature: 0, system: "You answer in one line.",
    messages: [{ role: "user", content: "the cat sat on" }, { role: "assistant", content: "the mat" },
      { role: "user", content: [{ type: "text", text: "and the dog?" }] }] };
  const whole = await client.messages.create(params);
  const stream = client.messages.stream(params);
  const events = [];
  let text = "";
  stream.on("streamEvent", (e) => events.push(e.type));
  stream.on("text", (d) => { text += d; });
  const final = await stream.finalMessage();
  const fail = async (p) => {
    try { await client.messages.create(p); return null; }
    catch (e) { return { status: e.status, type: e.error && e.error.error && e.error.error.type, message: e.error && e.error.error && e.error.error.message }; }
  };
  const noMax = await fail({ ...params, max_tokens: undefined });
  const unknown = await fail({ ...params, model: "claude-sonnet-4-5" });
  console.log(JSON.stringify({ whole, events, text, final, noMax, unknown }));
})().catch((e) => { console.error(e); process.exit(1); });
`

// The official Anthropic SDK's messages.create and messages.stream work
// unchanged against the site: the message's text is the chat completion's
// for the same conversation (greedy), its stop reason and usage too; the
// stream's events are Anthropic's; errors are the SDK's typed errors.
func TestMessagesAnthropicSDK(t *testing.T) {
	s := startSite(t, 2, "")
	type message struct {
		ID, Type, Role, Model string
		Content               []protocol.MessagesBlock
		StopReason            string `json:"stop_reason"`
		Usage                 protocol.MessagesUsage
	}
	type sdkError struct {
		Status        int
		Type, Message string
	}
	var got struct {
		Whole, Final   message
		Events         []string
		Text           string
		NoMax, Unknown *sdkError
	}
	mustUnmarshal(t, npmref.NodeScript(t, anthropicMessages, "BASE="+s.base), &got)

	var chat protocol.ChatCompletionResponse
	mustUnmarshal(t, post(t, s.base+protocol.PathChatCompletions, map[string]any{"model": "tiny", "max_tokens": 12, "temperature": 0,
		"messages": []map[string]any{{"role": "system", "content": "You answer in one line."}, {"role": "user", "content": "the cat sat on"},
			{"role": "assistant", "content": "the mat"}, {"role": "user", "content": "and the dog?"}}}, http.StatusOK), &chat)
	want := chat.Choices[0].Message.Content
	reason := map[string]string{"stop": "end_turn", "length": "max_tokens"}[*chat.Choices[0].FinishReason]
	// The prompt is the input and the cache reads together: the stream,
	// the conversation asked again, finds it in the engines' prefix cache.
	for what, m := range map[string]message{"create": got.Whole, "stream": got.Final} {
		u := m.Usage
		if m.Type != "message" || m.Role != "assistant" || m.Model != "tiny" || len(m.Content) != 1 || m.Content[0].Text != want ||
			m.StopReason != reason || u.InputTokens+u.CacheReadInputTokens != chat.Usage.PromptTokens || u.CacheCreationInputTokens != 0 ||
			u.OutputTokens != chat.Usage.CompletionTokens || what == "stream" && u.CacheReadInputTokens == 0 {
			t.Errorf("%s: %+v, want text %q, %s, %d prompt tokens (cached on the second ask), %d output", what, m, want, reason,
				chat.Usage.PromptTokens, chat.Usage.CompletionTokens)
		}
	}
	if got.Text != want {
		t.Errorf("streamed text %q, chat %q", got.Text, want)
	}
	var names []string
	for _, e := range got.Events {
		if n := len(names); n == 0 || names[n-1] != e || e != "content_block_delta" {
			names = append(names, e)
		}
	}
	// The SDK keeps ping events to itself (router's tests see them).
	if w := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}; !slices.Equal(names, w) {
		t.Errorf("events %v, want %v", names, w)
	}
	if e := got.NoMax; e == nil || e.Status != 400 || e.Type != "invalid_request_error" || !json.Valid([]byte(`"`+e.Message+`"`)) || e.Message == "" {
		t.Errorf("no max_tokens: %+v", e)
	}
	if e := got.Unknown; e == nil || e.Status != 404 || e.Type != "not_found_error" {
		t.Errorf("unknown model: %+v", e)
	}
}
