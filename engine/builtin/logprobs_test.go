package builtin

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// lpChoice is a choice, or a chunk of one, with its logprobs.
type lpChoice struct {
	Index        int                          `json:"index"`
	Text         string                       `json:"text"`
	FinishReason *string                      `json:"finish_reason"`
	Logprobs     *protocol.CompletionLogprobs `json:"logprobs"`
}

// completeLogprobs runs a completion and returns its choices: whole, or
// every chunk's, in order.
func completeLogprobs(t *testing.T, te *testEngine, req map[string]any) []lpChoice {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := te.client.Post(te.url+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp))
	}
	var out []lpChoice
	if req["stream"] != true {
		var body struct{ Choices []lpChoice }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return body.Choices
	}
	sr := protocol.NewSSEReader(resp.Body, 0)
	for {
		data, err := sr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if protocol.IsDone(data) {
			continue
		}
		var body struct{ Choices []lpChoice } // fresh: chunks must not share logprobs
		if err := json.Unmarshal(data, &body); err != nil {
			t.Fatal(err)
		}
		out = append(out, body.Choices...)
	}
}

// joinLogprobs concatenates the logprobs of choice index's chunks, and
// returns its text.
func joinLogprobs(t *testing.T, chunks []lpChoice, index int) (string, protocol.CompletionLogprobs) {
	t.Helper()
	var text strings.Builder
	var all protocol.CompletionLogprobs
	for _, c := range chunks {
		if c.Index != index {
			continue
		}
		if c.Logprobs == nil {
			t.Fatalf("chunk %q has no logprobs", c.Text)
		}
		all.TextOffset = append(all.TextOffset, c.Logprobs.TextOffset...)
		all.TokenLogprobs = append(all.TokenLogprobs, c.Logprobs.TokenLogprobs...)
		all.Tokens = append(all.Tokens, c.Logprobs.Tokens...)
		all.TopLogprobs = append(all.TopLogprobs, c.Logprobs.TopLogprobs...)
		text.WriteString(c.Text)
	}
	return text.String(), all
}

// checkLogprobs checks one choice's logprobs against its text: k sorted
// alternatives per token, valid log probabilities, offsets that locate
// each token in the text, and, when greedy, the chosen token first.
func checkLogprobs(t *testing.T, text string, lp protocol.CompletionLogprobs, k int, greedy bool) {
	t.Helper()
	n := len(lp.Tokens)
	if n == 0 || len(lp.TokenLogprobs) != n || len(lp.TextOffset) != n || len(lp.TopLogprobs) != n {
		t.Fatalf("logprobs of %d tokens: %d logprobs, %d offsets, %d top", n, len(lp.TokenLogprobs), len(lp.TextOffset), len(lp.TopLogprobs))
	}
	if strings.Join(lp.Tokens, "") != text {
		t.Fatalf("tokens %q do not make the text %q", lp.Tokens, text)
	}
	for i, tok := range lp.Tokens {
		if off := lp.TextOffset[i]; off > len(text) || !strings.HasPrefix(text[off:], tok) {
			t.Fatalf("token %d %q is not at text_offset %d of %q", i, tok, off, text)
		}
		if p := lp.TokenLogprobs[i]; !(p <= 0) || math.IsInf(p, 0) {
			t.Fatalf("token %d: logprob %v", i, p)
		}
		top := lp.TopLogprobs[i]
		if len(top) != k {
			t.Fatalf("token %d: %d alternatives, want %d", i, len(top), k)
		}
		mass := 0.0
		for j, alt := range top {
			mass += math.Exp(alt.Logprob)
			if j > 0 && alt.Logprob > top[j-1].Logprob {
				t.Fatalf("token %d: alternatives not sorted: %v", i, top)
			}
			if alt.Token == tok && alt.Logprob != lp.TokenLogprobs[i] {
				t.Fatalf("token %d: %q has logprob %v and alternative logprob %v", i, tok, lp.TokenLogprobs[i], alt.Logprob)
			}
		}
		if mass > 1+1e-9 {
			t.Fatalf("token %d: alternatives hold probability %v", i, mass)
		}
		if k > 0 && lp.TokenLogprobs[i] > top[0].Logprob {
			t.Fatalf("token %d: logprob %v above the most likely alternative %v", i, lp.TokenLogprobs[i], top[0])
		}
		if greedy && k > 0 && top[0].Token != tok {
			t.Fatalf("token %d: greedy chose %q, the most likely alternative is %v", i, tok, top[0])
		}
	}
}

// TestLogprobs checks the logprobs of greedy and sampled completions,
// whole and streamed: sorted alternatives, the greedy token first, every
// token located in the text, the stream agreeing token by token with the
// whole answer, and the text unchanged by asking for them.
func TestLogprobs(t *testing.T) {
	te := newTestEngine(t, "", false)
	plain := complete(t, te.client, te.url, protocol.PathCompletions, greedy("the quick brown fox", 24))
	cases := []struct {
		name   string
		req    map[string]any
		k      int
		greedy bool
	}{
		{"greedy k=3", with(greedy("the quick brown fox", 24), "logprobs", 3), 3, true},
		{"greedy k=0", with(greedy("the quick brown fox", 24), "logprobs", 0), 0, true},
		{"greedy k=5 biased", with(greedy("the quick brown fox", 24), "logprobs", 5, "frequency_penalty", 1.5, "logit_bias", map[string]float64{"300": 5}), 5, true},
		{"sampled n=2", map[string]any{"prompt": "once upon a time", "max_tokens": 24, "temperature": 1.3, "top_p": 0.9, "seed": 7, "n": 2, "logprobs": 2}, 2, false},
	}
	for _, c := range cases {
		whole := completeLogprobs(t, te, c.req)
		stream := completeLogprobs(t, te, with(c.req, "stream", true))
		for i, w := range whole {
			if w.Logprobs == nil {
				t.Fatalf("%s: choice %d has no logprobs", c.name, i)
			}
			checkLogprobs(t, w.Text, *w.Logprobs, c.k, c.greedy)
			text, st := joinLogprobs(t, stream, i)
			if text != w.Text || !reflect.DeepEqual(st, *w.Logprobs) {
				t.Fatalf("%s: choice %d: stream %q %+v\nwhole %q %+v", c.name, i, text, st, w.Text, *w.Logprobs)
			}
			if c.name == "greedy k=3" && w.Text != plain.texts[0] {
				t.Fatalf("asking for logprobs changed the greedy text: %q, want %q", w.Text, plain.texts[0])
			}
		}
		for _, chunk := range stream {
			if chunk.Logprobs != nil && strings.Join(chunk.Logprobs.Tokens, "") != chunk.Text {
				t.Fatalf("%s: chunk %q carries the logprobs of %q", c.name, chunk.Text, chunk.Logprobs.Tokens)
			}
		}
	}
	if got := completeLogprobs(t, te, greedy("the quick brown fox", 3)); got[0].Logprobs != nil {
		t.Fatalf("logprobs without asking: %+v", got[0].Logprobs)
	}
}

// TestLogprobsWithStopString checks that a stop string ends the logprobs
// with the text: the entries of the tokens before the one in which it
// begins, in the stream as in the whole answer; the dropped tokens' go
// with them.
func TestLogprobsWithStopString(t *testing.T) {
	te := newTestEngine(t, "", false)
	base := complete(t, te.client, te.url, protocol.PathCompletions, greedy("a story about the sea", 30)).texts[0]
	stop := midStop(t, base) // spans two tokens, starts inside a word
	want := beforeToken(t, base, strings.Index(base, stop))
	req := with(greedy("a story about the sea", 30), "stop", []string{stop}, "logprobs", 1)
	whole := completeLogprobs(t, te, req)[0]
	if whole.Text != want || whole.Logprobs == nil {
		t.Fatalf("text %q, want %q", whole.Text, want)
	}
	lp := whole.Logprobs
	if strings.Join(lp.Tokens, "") != want || lp.TextOffset[len(lp.TextOffset)-1]+len(lp.Tokens[len(lp.Tokens)-1]) != len(want) {
		t.Fatalf("tokens %q at %v, want those of %q", lp.Tokens, lp.TextOffset, want)
	}
	text, st := joinLogprobs(t, completeLogprobs(t, te, with(req, "stream", true)), 0)
	if text != whole.Text || !reflect.DeepEqual(st, *lp) {
		t.Fatalf("stream %q %+v\nwhole %q %+v", text, st, whole.Text, *lp)
	}
}
