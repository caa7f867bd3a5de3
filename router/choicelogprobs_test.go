package router

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/internal/stopscan"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// fakeEngineChunk is an engine's chunk: text, and an entry per token with its
// offset in the attempt's text (logprob -i, so entries can be told apart).
func fakeEngineChunk(text string, tokens []string, offsets []int) (string, *protocol.CompletionLogprobs) {
	lp := protocol.NewCompletionLogprobs(len(tokens))
	for i, tok := range tokens {
		lp.Tokens = append(lp.Tokens, tok)
		lp.TextOffset = append(lp.TextOffset, offsets[i])
		lp.TokenLogprobs = append(lp.TokenLogprobs, -float64(len(lp.Tokens)+offsets[i]))
		lp.TopLogprobs = append(lp.TopLogprobs, protocol.TopLogprobs{{Token: tok, Logprob: -1}})
	}
	return text, lp
}

// recordingSink records what a client would see.
type recordingSink struct {
	text    strings.Builder
	tokens  []string
	offsets []int
	deltas  int
}

func (s *recordingSink) flush() {}

func (s *recordingSink) delta(_ int, text string, lp *protocol.CompletionLogprobs) error {
	s.deltas++
	s.text.WriteString(text)
	if lp != nil {
		s.tokens = append(s.tokens, lp.Tokens...)
		s.offsets = append(s.offsets, lp.TextOffset...)
	}
	return nil
}
func (s *recordingSink) finish(int, string)       {}
func (s *recordingSink) done(protocol.Usage)      {}
func (s *recordingSink) fail(err *protocol.Error) {}
func (s *recordingSink) got() string {
	return fmt.Sprintf("%q %q %v", s.text.String(), s.tokens, s.offsets)
}
func want(text string, tokens []string, off []int) string {
	return fmt.Sprintf("%q %q %v", text, tokens, off)
}

// A choice's logprobs go out with the text they belong to, through the
// stop scanner, a stop string and a failed attempt, their offsets in the
// client's text.
func TestLogprobsFollowDeliveredText(t *testing.T) {
	type chunk struct {
		text    string
		tokens  []string
		offsets []int
	}
	cases := []struct {
		name    string
		stops   []string
		echo    int
		chunks  []chunk
		flush   bool // the attempt finished: the held text goes out
		resumed []chunk
		want    string
	}{
		{"plain", nil, 0, []chunk{{"ab", []string{"a", "b"}, []int{0, 1}}, {"cd", []string{"cd"}, []int{2}}}, true, nil,
			want("abcd", []string{"a", "b", "cd"}, []int{0, 1, 2})},
		{"echo shifts the offsets", nil, 5, []chunk{{"ab", []string{"a", "b"}, []int{0, 1}}}, true, nil,
			want("ab", []string{"a", "b"}, []int{5, 6})},
		{"held back with its text", []string{"XY"}, 0, []chunk{{"aX", []string{"a", "X"}, []int{0, 1}}, {"b", []string{"b"}, []int{2}}}, true, nil,
			want("aXb", []string{"a", "X", "b"}, []int{0, 1, 2})},
		{"cut by a stop string", []string{"XY"}, 0, []chunk{{"aX", []string{"a", "X"}, []int{0, 1}}, {"Yb", []string{"Y", "b"}, []int{2, 3}}}, false, nil,
			want("a", []string{"a"}, []int{0})},
		{"a token straddling the cut stays", []string{"XY"}, 0, []chunk{{"aXYb", []string{"aXYb"}, []int{0}}}, false, nil,
			want("a", []string{"aXYb"}, []int{0})},
		{"a token without text goes with the next", []string{"é!"}, 0, []chunk{{"caf", []string{"c", "af"}, []int{0, 1}}, {"é", []string{"\xc3", "é"}, []int{3, 3}}, {"x", []string{"x"}, []int{5}}}, true, nil,
			want("caféx", []string{"c", "af", "\xc3", "é", "x"}, []int{0, 1, 3, 3, 5})},
		{"offsets outside the chunk are its start", nil, 0, []chunk{{"ab", []string{"a", "b"}, []int{0, 7}}, {"c", []string{"c"}, []int{-3}}}, true, nil,
			want("abc", []string{"a", "b", "c"}, []int{0, 0, 2})},
		{"resumed: what was held back is generated again", []string{"XY"}, 0,
			[]chunk{{"ab", []string{"a", "b"}, []int{0, 1}}, {"X", []string{"X"}, []int{2}}}, false,
			[]chunk{{"Xc", []string{"X", "c"}, []int{0, 1}}},
			want("abXc", []string{"a", "b", "X", "c"}, []int{0, 1, 2, 3})},
		{"resumed: a token partly delivered keeps its entry", []string{"XY"}, 0,
			[]chunk{{"aX", []string{"aX"}, []int{0}}}, false,
			[]chunk{{"Xc", []string{"Xc"}, []int{0}}},
			want("aXc", []string{"aX", "Xc"}, []int{0, 1})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := &recordingSink{}
			j := &choiceJob{stop: stopscan.New(c.stops), logprobs: newChoiceLogprobs(true)}
			j.logprobs.echo = c.echo
			run := func(chunks []chunk, flush bool) bool {
				j.stop.Drop()
				j.logprobs.resume(j.delivered.Len())
				j.base, j.received = j.delivered.Len(), j.delivered.Len()
				for _, ch := range chunks {
					text, lp := fakeEngineChunk(ch.text, ch.tokens, ch.offsets)
					hit, err := j.deliver(text, lp, out)
					if err != nil {
						t.Fatal(err)
					}
					if hit {
						return true
					}
				}
				if flush {
					if err := j.send(j.stop.Flush(), j.logprobs.take(j.received), out); err != nil {
						t.Fatal(err)
					}
				}
				return flush
			}
			done := run(c.chunks, c.flush && c.resumed == nil)
			if !done && c.resumed != nil {
				run(c.resumed, true)
			}
			if err := j.finish(protocol.FinishStop, nil, out); err != nil {
				t.Fatal(err)
			}
			if got := out.got(); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// Without logprobs asked for, none go out, and text goes as before.
func TestNoLogprobsUnlessAsked(t *testing.T) {
	q := newChoiceLogprobs(false)
	_, lp := fakeEngineChunk("ab", []string{"a", "b"}, []int{0, 1})
	q.add(lp, 0, 0, 2)
	if got := q.take(2); got != nil {
		t.Fatalf("logprobs %+v, want nil", got)
	}
	if !reflect.DeepEqual(q.none(), (*protocol.CompletionLogprobs)(nil)) || len(q.held) != 0 {
		t.Fatalf("held %v", q.held)
	}
}

// An engine that sends no text_offset (MLC's) gets its tokens' offsets
// from their strings, or from the router's tokenizer where the strings do
// not spell the text (MLC's token strings may differ from the text).
func TestWithOffsetsFillsMissingOffsets(t *testing.T) {
	tok, err := tokenizer.ForModel("tiny")
	if err != nil {
		t.Fatal(err)
	}
	lp := func(tokens ...string) *protocol.CompletionLogprobs {
		return &protocol.CompletionLogprobs{Tokens: tokens, TokenLogprobs: make([]float64, len(tokens)), TopLogprobs: make([]protocol.TopLogprobs, len(tokens))}
	}
	for _, c := range []struct {
		name string
		lp   *protocol.CompletionLogprobs
		text string
		tok  Tokenizer
		want []int
	}{
		{"spelled", lp(" the", " cat", " sat"), " the cat sat", nil, []int{5, 9, 13}},
		{"tokenizer", lp("the", "cat", "sat"), " the cat sat", tok, []int{5, 9, 13}},
		{"no tokenizer", lp("the", "cat", "sat"), " the cat sat", nil, nil},
		{"counts differ", lp("the", "cat"), " the cat sat", tok, nil},
		{"engine's kept", &protocol.CompletionLogprobs{Tokens: []string{"a"}, TextOffset: []int{3}}, "a", tok, []int{3}},
	} {
		got := withOffsets(c.lp, c.text, 5, c.tok)
		if !slices.Equal(got.TextOffset, c.want) {
			t.Errorf("%s: offsets %v, want %v", c.name, got.TextOffset, c.want)
		}
	}
}
