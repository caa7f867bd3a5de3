package caddymlc

import (
	"encoding/json"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// sameLogprobs compares logprobs exactly: the tokens, their offsets
// (want's shifted by shift), their log probabilities and alternatives. The
// built-in engine computes a token's logits the same whether it decoded
// the text before it or prefilled it (a resumed attempt), so greedy
// logprobs are exact across engines and attempts, as the text is.
func sameLogprobs(t *testing.T, what string, got, want *protocol.CompletionLogprobs, shift int) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: logprobs %v, want %v", what, got, want)
	}
	if got.Len() != want.Len() || len(got.TextOffset) != len(want.TextOffset) || len(got.TopLogprobs) != len(want.TopLogprobs) {
		t.Fatalf("%s: %d tokens, want %d", what, got.Len(), want.Len())
	}
	same := func(i int, a, b float64) {
		if a != b {
			t.Fatalf("%s: token %d (%q): logprob %v, want %v", what, i, want.Tokens[i], a, b)
		}
	}
	for i := range want.Tokens {
		if got.Tokens[i] != want.Tokens[i] || got.TextOffset[i] != want.TextOffset[i]+shift {
			t.Fatalf("%s: token %d: %q at %d, want %q at %d", what, i, got.Tokens[i], got.TextOffset[i], want.Tokens[i], want.TextOffset[i]+shift)
		}
		same(i, got.TokenLogprobs[i], want.TokenLogprobs[i])
		g, w := got.TopLogprobs[i], want.TopLogprobs[i]
		if len(g) != len(w) {
			t.Fatalf("%s: token %d: %d alternatives, want %d", what, i, len(g), len(w))
		}
		for k := range w {
			if g[k].Token != w[k].Token {
				t.Fatalf("%s: token %d: alternative %d is %q, want %q", what, i, k, g[k].Token, w[k].Token)
			}
			same(i, g[k].Logprob, w[k].Logprob)
		}
	}
}

// streamedLogprobs joins the logprobs of a stream's chunks (events of a
// completion stream), checking that each chunk's entries belong to its
// text: each token's offset is within the chunk's text.
func streamedLogprobs(t *testing.T, evs []string) (string, *protocol.CompletionLogprobs) {
	t.Helper()
	text, all := "", protocol.NewCompletionLogprobs(0)
	for _, ev := range evs {
		var c protocol.CompletionResponse
		if json.Unmarshal([]byte(ev), &c) != nil || len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		if ch.Logprobs != nil {
			for _, off := range ch.Logprobs.TextOffset {
				if off < len(text) || off > len(text)+len(ch.Text) {
					t.Fatalf("an entry at %d goes with text [%d, %d): %s", off, len(text), len(text)+len(ch.Text), ev)
				}
			}
		}
		text += ch.Text
		all.Append(ch.Logprobs)
	}
	return text, all
}

// whole decodes a whole completion.
func whole(t *testing.T, raw []byte) protocol.CompletionResponse {
	t.Helper()
	var c protocol.CompletionResponse
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) == 0 {
		t.Fatalf("%v: %s", err, raw)
	}
	return c
}

// The router passes the engines' logprobs to the client: the same as a
// direct call to an engine, whole or streamed, their offsets in the text
// the client gets (the echoed prompt included), in the chat shape for
// chat, with up to 20 alternatives there.
func TestLogprobsThroughTheRouter(t *testing.T) {
	for _, mode := range []string{router.ModeDisagg, router.ModeWhole} {
		t.Run(mode, func(t *testing.T) {
			s := startSite(t, 2, "\t\t\tmode "+mode+"\n")
			body := with(greedy("the quick brown fox", 24), "logprobs", 3)
			want := whole(t, post(t, s.engines[1]+protocol.PathCompletions, body, 200)).Choices[0]
			got := whole(t, post(t, s.base+protocol.PathCompletions, body, 200)).Choices[0]
			if got.Text != want.Text {
				t.Fatalf("text %q, want %q", got.Text, want.Text)
			}
			sameLogprobs(t, "whole", got.Logprobs, want.Logprobs, 0)

			evs, _ := events(t, post(t, s.base+protocol.PathCompletions, with(body, "stream", true), 200))
			text, lp := streamedLogprobs(t, asStrings(evs))
			if text != want.Text {
				t.Fatalf("streamed %q, want %q", text, want.Text)
			}
			sameLogprobs(t, "streamed", lp, want.Logprobs, 0)

			echoed := whole(t, post(t, s.base+protocol.PathCompletions, with(body, "echo", true), 200)).Choices[0]
			sameLogprobs(t, "echo", echoed.Logprobs, want.Logprobs, len("the quick brown fox"))

			// Chat: the completion of the rendered conversation, in the
			// chat shape.
			msgs := []chat.Message{{Role: "user", Content: chat.Content{Text: "where does the river go"}}}
			rendered, err := chat.Tiny().Render(msgs, chat.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			tok, _ := tokenizer.ForModel("tiny")
			for _, k := range []int{3, 20} {
				ref := map[string]any{"prompt": tok.Encode(rendered), "max_tokens": 16, "temperature": 0, "stop": chat.Tiny().StopStrings(), "logprobs": k}
				wantChat := whole(t, post(t, s.engines[1]+protocol.PathCompletions, ref, 200)).Choices[0].Logprobs.Chat()
				raw := post(t, s.base+protocol.PathChatCompletions, map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0, "logprobs": true, "top_logprobs": k}, 200)
				var answer protocol.ChatCompletionResponse
				if err := json.Unmarshal(raw, &answer); err != nil || answer.Choices[0].Logprobs == nil {
					t.Fatalf("chat: %v %s", err, raw)
				}
				gotChat := answer.Choices[0].Logprobs
				if len(gotChat.Content) != len(wantChat.Content) || len(gotChat.Content) == 0 {
					t.Fatalf("chat: %d tokens, want %d", len(gotChat.Content), len(wantChat.Content))
				}
				for i, w := range wantChat.Content {
					g := gotChat.Content[i]
					if g.Token != w.Token || len(g.TopLogprobs) != k || len(w.TopLogprobs) != k || g.Logprob != w.Logprob {
						t.Fatalf("chat token %d: %+v, want %+v", i, g, w)
					}
				}
			}
		})
	}
}

func asStrings(evs [][]byte) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = string(e)
	}
	return out
}

// Across an attempt resumed on another engine (the first killed after
// the first text), each token keeps the logprobs its own attempt computed:
// greedy logprobs equal those of an undisturbed run on one engine.
func TestLogprobsAcrossAResumedAttempt(t *testing.T) {
	for _, c := range []struct {
		mode    string
		engines int
	}{{router.ModeDisagg, 3}, {router.ModeWhole, 2}} {
		t.Run(c.mode, func(t *testing.T) {
			s := startSite(t, c.engines, "\t\t\tmode "+c.mode+"\n")
			body := with(greedy("a tale of two rivers and the mill between them", 1500), "logprobs", 2) // long enough to outlast the kill
			want := whole(t, post(t, s.engines[1]+protocol.PathCompletions, body, 200)).Choices[0]
			failures := func() float64 { return metricValue(t, "caddy_mlc_retries_total", "cause", "failure") }
			before := failures()
			got, err := streamKilling(t, s, body, func() int { return servingEngine(t) })
			if err != nil || !got.done || got.errBody != nil {
				t.Fatalf("stream: %v %+v", err, got.errBody)
			}
			text, lp := streamedLogprobs(t, got.raw)
			if text != want.Text {
				t.Fatalf("after the kill:\n got  %q\n want %q", text, want.Text)
			}
			if failures() == before {
				t.Fatal("no attempt was retried: the test did not resume anything")
			}
			sameLogprobs(t, "resumed", lp, want.Logprobs, 0)
		})
	}
}

// servingEngine returns the engine that generates the one request in
// flight.
func servingEngine(t *testing.T) int {
	t.Helper()
	for i, e := range liveNow().lifecycle.Statuses()[0].Engines {
		if e.Role != "prefill" && e.InFlight == 1 {
			return i
		}
	}
	t.Fatalf("no engine is generating: %+v", liveNow().lifecycle.Statuses())
	return -1
}
