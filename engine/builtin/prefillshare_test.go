package builtin

import (
	"slices"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
)

// TestPrefillShares checks the division of a step's prefill budget: the
// short prompts (those that fit one budget) first, smallest first, at
// least an eighth of the budget for the long ones while they wait, and the
// long ones one after another in the order they were admitted.
func TestPrefillShares(t *testing.T) {
	for _, c := range []struct {
		left     []int
		admitted []uint64 // 1, 2, ... when nil
		budget   int
		want     []int
	}{
		{[]int{1000}, nil, 512, []int{512}},
		{[]int{1000, 10}, nil, 512, []int{502, 10}},
		{[]int{1000, 1000}, nil, 512, []int{512, 0}},
		{[]int{1000, 2000}, []uint64{7, 3}, 512, []int{0, 512}},
		{[]int{1000, 100, 300}, nil, 512, []int{112, 100, 300}},
		{[]int{1000, 64, 64, 64}, nil, 128, []int{16, 37, 37, 38}},
		{[]int{64, 1000, 64, 64}, nil, 128, []int{37, 16, 37, 38}},
		{[]int{100, 20, 1000}, nil, 64, []int{44, 20, 0}},
		{[]int{5, 5, 5}, nil, 2, []int{2, 0, 0}},
		{[]int{2, 2, 2}, nil, 2, []int{1, 1, 0}},
		{nil, nil, 512, []int{}},
	} {
		var seqs []*sequence
		for i, n := range c.left {
			s := &sequence{tokens: make([]int, n), admitted: uint64(i + 1)}
			if c.admitted != nil {
				s.admitted = c.admitted[i]
			}
			seqs = append(seqs, s)
		}
		if got := prefillShares(seqs, c.budget); !slices.Equal(got, c.want) {
			t.Errorf("left %v, budget %d: shares %v, want %v", c.left, c.budget, got, c.want)
		}
	}
}

// TestShortPromptNotBehindLongPrefill checks that a short prompt that
// comes while a long one prefills is answered before the long one's
// prefill ends, and that neither text changes for being prefilled in
// shares.
func TestShortPromptNotBehindLongPrefill(t *testing.T) {
	slow := newTestEngine(t, "prefill_chunk_size=64", false, "--prefix-cache-mode", "disable", "--prefill-delay", "1ms")
	ref := newTestEngine(t, "prefill_chunk_size=4096", false, "--prefix-cache-mode", "disable")
	longReq, shortReq := greedy(repeated(tiny.New().Encode(prompts(8)[7]), 3000), 4), greedy("the quick brown fox", 5)

	done := completeAsync(t, slow.client, slow.url, "/v1/completions", longReq)
	slow.waitMetrics(func(m Metrics) bool { return m.PrefillTokens > 0 })
	short := complete(t, slow.client, slow.url, "/v1/completions", shortReq)
	m, err := slow.e.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m.DecodeTokens == 0 || m.Running == 0 {
		t.Errorf("the short prompt waited for the long one's prefill: %+v", m)
	}
	select {
	case <-done:
		t.Errorf("the long prompt finished before the short one")
	default:
	}
	longGot := <-done
	if want := complete(t, ref.client, ref.url, "/v1/completions", shortReq); short.texts[0] != want.texts[0] {
		t.Errorf("short prompt: %q in shares, %q alone", short.texts[0], want.texts[0])
	}
	if want := complete(t, ref.client, ref.url, "/v1/completions", longReq); longGot.texts[0] != want.texts[0] {
		t.Errorf("long prompt: %q in shares, %q whole", longGot.texts[0], want.texts[0])
	}
}

// TestLongPromptsShareAHeadComputedBeside checks that a long prompt
// admitted while another with the same head prefills takes that head from
// the prefix cache when its turn comes, instead of computing it again, and
// that both texts are the ones computed alone.
func TestLongPromptsShareAHeadComputedBeside(t *testing.T) {
	te := newTestEngine(t, "prefill_chunk_size=64", false, "--prefill-delay", "500us")
	ref := newTestEngine(t, "prefill_chunk_size=4096", false, "--prefix-cache-mode", "disable")
	words := tiny.New().Encode(prompts(8)[7])
	head := repeated(words, 1024)
	a := append(slices.Clone(head), words[:40]...)
	b := append(slices.Clone(head), words[40:90]...)
	reqA, reqB := greedy(a, 4), greedy(b, 4)

	done := completeAsync(t, te.client, te.url, "/v1/completions", reqA)
	te.waitMetrics(func(m Metrics) bool { return m.PrefillTokens > 0 })
	gotB := complete(t, te.client, te.url, "/v1/completions", reqB)
	gotA := <-done
	m, err := te.e.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m.ReusedTokens < int64(len(head)) {
		t.Errorf("the second prompt reused %d tokens of the %d-token head computed beside it", m.ReusedTokens, len(head))
	}
	if max := int64(len(a) + len(b) - len(head)); m.PrefillTokens > max {
		t.Errorf("the engine computed %d prompt tokens, more than the %d the two prompts have apart from one head", m.PrefillTokens, max)
	}
	if want := complete(t, ref.client, ref.url, "/v1/completions", reqA); gotA.texts[0] != want.texts[0] {
		t.Errorf("first prompt: %q beside the other, %q alone", gotA.texts[0], want.texts[0])
	}
	if want := complete(t, ref.client, ref.url, "/v1/completions", reqB); gotB.texts[0] != want.texts[0] {
		t.Errorf("second prompt: %q sharing the head, %q alone", gotB.texts[0], want.texts[0])
	}
}

// repeated is n tokens: words over and over.
func repeated(words []int, n int) []int {
	var out []int
	for len(out) < n {
		out = append(out, words...)
	}
	return out[:n]
}
