package builtin

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
)

// outputRun pushes ids, each with a logprobs entry, into an output with
// the given stop strings, then flushes it unless a stop string ended it.
// It returns the pieces handed out.
func outputRun(stop []string, ids []int) (pieces []piece, stopped bool) {
	o := newOutput(tiny.New(), tiny.New().Token, stop)
	for i, id := range ids {
		p, hit := o.push(id, &tokenLogprob{token: tiny.New().Token(id), logprob: -float64(i)})
		pieces = append(pieces, p)
		if hit {
			return pieces, true
		}
	}
	return append(pieces, o.flush()), false
}

// tokensOf lists the tokens of the entries of pieces.
func tokensOf(pieces []piece) (text string, tokens []string, offsets []int) {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p.text)
		for _, lp := range p.logprobs {
			tokens = append(tokens, lp.token)
			offsets = append(offsets, lp.start)
		}
	}
	return b.String(), tokens, offsets
}

// TestOutputHeldTextKeepsItsLogprobs checks that the entries of tokens
// whose text a stop-string prefix holds back wait with that text, and go
// out with it when the output is flushed (a preemption, the end).
func TestOutputHeldTextKeepsItsLogprobs(t *testing.T) {
	ids := tiny.New().Encode(" the end of the")
	o := newOutput(tiny.New(), tiny.New().Token, []string{" of the night"})
	var got []piece
	for _, id := range ids {
		p, hit := o.push(id, &tokenLogprob{token: tiny.New().Token(id)})
		if hit {
			t.Fatal("stop string found in text without it")
		}
		got = append(got, p)
	}
	text, tokens, _ := tokensOf(got)
	if text != " the end" || !slices.Equal(tokens, []string{" the", " end"}) {
		t.Fatalf("before the flush: %q %q, want the text before the held \" of the\"", text, tokens)
	}
	flushed := o.flush()
	if flushed.text != " of the" || len(flushed.logprobs) != 2 || flushed.logprobs[0].start != len(" the end") {
		t.Fatalf("flush: %q %+v", flushed.text, flushed.logprobs)
	}
	if p := o.flush(); p.text != "" || p.logprobs != nil {
		t.Fatalf("second flush: %+v", p)
	}
}

// TestOutputStopDropsItsToken checks that a stop string ends the text
// before the token it begins in, as MLC's engine does, and that the
// entries go with the text: the dropped tokens' with it.
func TestOutputStopDropsItsToken(t *testing.T) {
	pieces, stopped := outputRun([]string{"end o"}, tiny.New().Encode(" the end of it all"))
	text, tokens, offsets := tokensOf(pieces)
	if !stopped || text != " the" || !slices.Equal(tokens, []string{" the"}) || !slices.Equal(offsets, []int{0}) {
		t.Fatalf("stopped %v, %q, tokens %q at %v", stopped, text, tokens, offsets)
	}
	pieces, stopped = outputRun([]string{" of"}, tiny.New().Encode(" the end of it all"))
	text, tokens, _ = tokensOf(pieces)
	if !stopped || text != " the end" || !slices.Equal(tokens, []string{" the", " end"}) {
		t.Fatalf("a stop that is a whole token: stopped %v, %q, tokens %q", stopped, text, tokens)
	}
}

// TestOutputIncompleteCharacter checks that the tokens of one character's
// bytes go out together with it, at the character's offset.
func TestOutputIncompleteCharacter(t *testing.T) {
	ids := tiny.New().Encode(" the café")
	pieces, _ := outputRun(nil, ids)
	if len(ids) < 5 || pieces[len(ids)-2].text != "" || len(pieces[len(ids)-2].logprobs) != 0 {
		t.Fatalf("the first byte of é was handed out: %+v", pieces[len(ids)-2])
	}
	text, tokens, offsets := tokensOf(pieces)
	if text != " the café" || len(tokens) != len(ids) {
		t.Fatalf("%q with %d tokens, want %d", text, len(tokens), len(ids))
	}
	if n := len(offsets); offsets[n-1] != offsets[n-2] || offsets[n-1] != strings.Index(text, "é") {
		t.Fatalf("offsets %v: both bytes of é should be at %d", offsets, strings.Index(text, "é"))
	}
}

// TestTopK checks the order of the alternatives: highest logit first, the
// lower id first on a tie, ids the model may not sample left out.
func TestTopK(t *testing.T) {
	logits := []float32{1, 5, 3, 5, 9, 2, 5}
	allowed := []bool{true, true, true, true, false, true, true}
	for k, want := range [][]int{nil, {1}, {1, 3}, {1, 3, 6}, {1, 3, 6, 2}, {1, 3, 6, 2, 5}, {1, 3, 6, 2, 5, 0}, {1, 3, 6, 2, 5, 0}} {
		if got := topK(logits, allowed, k); !slices.Equal(got, want) {
			t.Errorf("k=%d: %v, want %v", k, got, want)
		}
	}
}

// TestLogprobOf checks the log-softmax over the ids the model may sample.
func TestLogprobOf(t *testing.T) {
	te := newTestEngine(t, "", false)
	e := te.e
	logits := make([]float32, len(e.allowed))
	for i := range logits {
		logits[i] = float32(i%7) - 3
	}
	var sum float64
	for i, l := range logits {
		if e.allowed[i] {
			sum += math.Exp(float64(l))
		}
	}
	id := slices.Index(e.allowed[100:], true) + 100
	lp := e.logprobOf(logits, id, 4)
	if want := float64(logits[id]) - math.Log(sum); math.Abs(lp.logprob-want) > 1e-9 {
		t.Fatalf("logprob %v, want %v", lp.logprob, want)
	}
	if len(lp.top) != 4 || math.Abs(lp.top[0].Logprob-(3-math.Log(sum))) > 1e-9 {
		t.Fatalf("alternatives %+v", lp.top)
	}
}
