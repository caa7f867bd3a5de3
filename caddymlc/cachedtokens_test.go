package caddymlc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// cached_token_weight is a number, 0 or more, once; JSON is checked as
// the Caddyfile is.
func TestCachedTokenWeightOption(t *testing.T) {
	var r Handler
	if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\ncached_token_weight 0.25\n}")); err != nil {
		t.Fatal(err)
	}
	if r.CachedTokenWeight == nil || *r.CachedTokenWeight != 0.25 {
		t.Fatalf("cached_token_weight %v", r.CachedTokenWeight)
	}
	for body, want := range map[string]string{
		"cached_token_weight -1":                      `cached_token_weight "-1": want a number, 0 or more`,
		"cached_token_weight cheap":                   `cached_token_weight "cheap"`,
		"cached_token_weight 0.5 cached_token_weight": "wrong argument count",
	} {
		var r Handler
		err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\n" + body + "\n}"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Testfile:4") {
			t.Errorf("%q: %v, want %q at line 4", body, err, want)
		}
	}
	var j Handler
	if err := json.Unmarshal([]byte(`{"model":"tiny","mode":"whole","cached_token_weight":-0.5}`), &j); err != nil {
		t.Fatal(err)
	}
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "cached_token_weight") {
		t.Errorf("JSON cached_token_weight -0.5: %v", err)
	}
}

// sdkCachedTokens is a client of the official SDKs that asks the same
// long conversation twice of each API (the second time streamed for
// Anthropic) and prints the usages the SDKs parsed.
const sdkCachedTokens = `
const Anthropic = require("@anthropic-ai/sdk");
const OpenAI = require("openai");
(async () => {
  const system = "You are a careful agent. ".repeat(12);
  const anthropic = new Anthropic({ baseURL: process.env.BASE, apiKey: "unused", maxRetries: 0 });
  const openai = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "unused", maxRetries: 0 });
  const m = { model: "tiny", max_tokens: 4, temperature: 0, system, messages: [{ role: "user", content: "list the files" }] };
  const messages = [(await anthropic.messages.create(m)).usage, (await anthropic.messages.stream(m).finalMessage()).usage];
  const c = { model: "tiny", max_tokens: 4, temperature: 0, messages: [{ role: "system", content: system }, { role: "user", content: "list the files" }] };
  const chat = [(await openai.chat.completions.create(c)).usage, (await openai.chat.completions.create(c)).usage];
  const r = { model: "tiny", max_output_tokens: 4, temperature: 0, instructions: system, input: "list the files" };
  const responses = [(await openai.responses.create(r)).usage, (await openai.responses.create(r)).usage];
  console.log(JSON.stringify({ messages, chat, responses }));
})().catch((e) => { console.error(e); process.exit(1); });
`

// The official SDKs read what the engines reused: the same conversation
// asked again finds its prompt in the engine's prefix cache, and each
// API says so where its SDK looks (Anthropic's cache_read_input_tokens,
// the rest in input_tokens; OpenAI's cached_tokens details).
func TestCachedTokensReachTheSDKs(t *testing.T) {
	s := startSite(t, 1, "\t\t\tmode whole\n\t\t\tprefix_cache radix\n")
	type details struct {
		CachedTokens int `json:"cached_tokens"`
	}
	var got struct {
		Messages []protocol.MessagesUsage
		Chat     []struct {
			PromptTokens        int     `json:"prompt_tokens"`
			PromptTokensDetails details `json:"prompt_tokens_details"`
		}
		Responses []struct {
			InputTokens        int     `json:"input_tokens"`
			InputTokensDetails details `json:"input_tokens_details"`
		}
	}
	before := engineMetrics(t, s.engines[0])
	mustUnmarshal(t, npmref.NodeScript(t, sdkCachedTokens, "BASE="+s.base), &got)
	after := engineMetrics(t, s.engines[0])
	if len(got.Messages) != 2 || len(got.Chat) != 2 || len(got.Responses) != 2 {
		t.Fatalf("usages %+v", got)
	}
	// What the SDKs read adds up to the engine's own counts: its count of
	// reused prompt tokens, and the prompt tokens it did not compute.
	var cached, prompt int
	for i := range 2 {
		cached += got.Messages[i].CacheReadInputTokens + got.Chat[i].PromptTokensDetails.CachedTokens + got.Responses[i].InputTokensDetails.CachedTokens
		prompt += got.Messages[i].InputTokens + got.Messages[i].CacheReadInputTokens + got.Chat[i].PromptTokens + got.Responses[i].InputTokens
	}
	reused := int(after["prefix_reused_tokens"] - before["prefix_reused_tokens"])
	computed := int(after["prefill_tokens"] - before["prefill_tokens"])
	t.Logf("the SDKs read %d cached of %d prompt tokens; the engine reused %d and computed %d", cached, prompt, reused, computed)
	if cached != reused || prompt-cached != computed {
		t.Errorf("the SDKs read %d cached of %d prompt tokens; the engine reused %d and computed %d", cached, prompt, reused, computed)
	}
	m := got.Messages[1]
	if m.CacheReadInputTokens <= 0 || m.CacheCreationInputTokens != 0 || m.InputTokens+m.CacheReadInputTokens != got.Messages[0].InputTokens+got.Messages[0].CacheReadInputTokens {
		t.Errorf("messages: %+v then %+v", got.Messages[0], m)
	}
	if c := got.Chat[1]; c.PromptTokensDetails.CachedTokens <= 0 || c.PromptTokensDetails.CachedTokens > c.PromptTokens {
		t.Errorf("chat: %+v", c)
	}
	if r := got.Responses[1]; r.InputTokensDetails.CachedTokens <= 0 || r.InputTokensDetails.CachedTokens > r.InputTokens {
		t.Errorf("responses: %+v", r)
	}
}
