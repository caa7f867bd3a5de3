package builtin

import (
	"slices"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
)

// TestPrefillShares checks the division of a step's prefill budget: the
// smallest asks served first, what they leave to the longer ones, and
// every sequence at least an equal share.
func TestPrefillShares(t *testing.T) {
	seqOf := func(left int) *sequence { return &sequence{tokens: make([]int, left)} }
	for _, c := range []struct {
		left   []int
		budget int
		want   []int
	}{
		{[]int{1000}, 512, []int{512}},
		{[]int{1000, 10}, 512, []int{502, 10}},
		{[]int{1000, 1000}, 512, []int{256, 256}},
		{[]int{1000, 100, 300}, 512, []int{206, 100, 206}},
		{[]int{5, 5, 5}, 2, []int{1, 1, 0}},
		{nil, 512, []int{}},
	} {
		var seqs []*sequence
		for _, n := range c.left {
			seqs = append(seqs, seqOf(n))
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
	words := tiny.New().Encode(prompts(8)[7])
	var long []int
	for len(long) < 3000 {
		long = append(long, words...)
	}
	long = long[:3000]
	longReq, shortReq := greedy(long, 4), greedy("the quick brown fox", 5)

	done := make(chan result, 1)
	go func() { done <- complete(t, slow.client, slow.url, "/v1/completions", longReq) }()
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
