package protocol

import (
	"encoding/json"
	"strconv"
	"strings"
)

// PromptTokensDetails is OpenAI's breakdown of a chat or completion's
// prompt tokens: CachedTokens of them were served from an engine's
// prefix cache, not computed.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Keys of usage.extra that say what an engine reused of a prompt.
const (
	// ExtraPrefixMatchedLength is the prompt tokens the engine found in
	// its prefix cache: MLC's prep_recv answers it (PrepRecvResponse);
	// the built-in engine also reports it, as caddy-mlc's extension, in
	// the usage.extra of every request's last event and of a remote_send
	// (then the prefill engine's own match, of the window it computed),
	// and in the first chunk of a completion stream (MatchedChunk).
	ExtraPrefixMatchedLength = "prefix_matched_length"
	// ExtraPrefillTokens is MLC's per-request metric (RequestMetrics,
	// which its engines put in the final usage.extra): the prompt tokens
	// the engine computed. What it did not compute of prompt_tokens it
	// took from its prefix cache.
	ExtraPrefillTokens = "prefill_tokens"
)

// MatchedChunk is the built-in engine's first chunk of a completion
// stream, caddy-mlc's extension: beside the chunk, prefix_matched_length,
// what its prefix cache held of the prompt, known before the first token
// (MLC's engines say it in their final usage only, and a router that
// reads nothing of it loses nothing). A router that announces usage
// before the first token (Anthropic's message_start, the Responses API's
// response.created) reads it there in whole mode.
type MatchedChunk struct {
	CompletionResponse
	PrefixMatchedLength *int `json:"prefix_matched_length,omitempty"`
}

// CachedTokensOf is how many of a request's prompt tokens the engine
// reused from its prefix cache, as its usage says: the built-in engine's
// prefix_matched_length, else MLC's prompt_tokens less its
// prefill_tokens (a request preempted and prefilled again computes more
// than its prompt: no reuse). ok is false when the usage says neither.
func CachedTokensOf(u *Usage) (n int, ok bool) {
	if u == nil {
		return 0, false
	}
	if n, ok := extraInt(u.Extra, ExtraPrefixMatchedLength); ok && n >= 0 {
		return n, true
	}
	if p, ok := extraInt(u.Extra, ExtraPrefillTokens); ok && p >= 0 && u.PromptTokens > 0 {
		return max(u.PromptTokens-p, 0), true
	}
	return 0, false
}

// extraInt reads an integer of an extra; MLC writes some counts as
// floats (1.0).
func extraInt(extra map[string]json.RawMessage, key string) (int, bool) {
	raw, ok := extra[key]
	if !ok {
		return 0, false
	}
	s := strings.TrimSpace(string(raw))
	if n, err := strconv.Atoi(s); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

// WithCached is u with cached of its prompt tokens reported as served
// from cache (prompt_tokens_details.cached_tokens); cached < 0, unknown,
// leaves the details out.
func (u Usage) WithCached(cached int) Usage {
	if cached >= 0 {
		u.PromptTokensDetails = &PromptTokensDetails{CachedTokens: min(cached, u.PromptTokens)}
	}
	return u
}

// Cached is the prompt tokens u reports served from cache; 0 when it
// does not say.
func (u Usage) Cached() int {
	if u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}
