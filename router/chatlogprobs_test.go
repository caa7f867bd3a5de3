package router

import (
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A chat's top_logprobs above the completions bound is served by the
// built-in engine (and engines the router cannot tell), refused with a
// 400 naming top_logprobs for MLC-LLM's engines, which bound a
// completion's logprobs at 5: never fewer alternatives than asked for.
func TestTopLogprobsBoundByEngine(t *testing.T) {
	for _, c := range []struct {
		kind string
		k    int
		ok   bool
	}{
		{"builtin", protocol.MaxChatTopLogprobs, true},
		{"command", protocol.MaxChatTopLogprobs, true},
		{"mlc", protocol.MaxCompletionLogprobs, true},
		{"mlc", protocol.MaxCompletionLogprobs + 1, false},
	} {
		r := &decoder{Config: &Config{EngineKind: engine.Kind(c.kind)}}
		e := r.checkTopLogprobs(&c.k)
		if (e == nil) != c.ok || e != nil && (e.Status != 400 || deref(e.Param) != "top_logprobs" || deref(e.Code) != protocol.CodeIntegerAboveMax) {
			t.Errorf("%s engines, top_logprobs %d: %+v", c.kind, c.k, e)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
