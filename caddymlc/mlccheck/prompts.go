package mlccheck

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// maxTokens is what every check asks an engine to generate: enough text
// for a difference to show, little enough to stay quick on any engine.
const maxTokens = 12

// Token ids of a prompt for an engine whose tokenizer the router cannot
// read: ordinary words in the vocabularies of today's models (below their
// special tokens, above Llama-2's byte tokens), within the model's
// vocab_size where mlc-chat-config.json gives it. An id outside the
// vocabulary fails a check in MLC's engine, which stops it.
const (
	plainIDLow  = 260
	plainIDHigh = 1000
)

// words make the text of prompts.
var words = strings.Fields(`the a cat dog sat ran on under over house river
	tree stone light morning evening quiet loud small large green red blue
	and then after before because while road city field garden window door`)

// prompts makes the check's prompts. Every prompt begins with the run's
// nonce and its own name, so that no engine holds it in its prefix cache
// from an earlier run or an earlier check, unless the check means it to.
type prompts struct {
	r     *handler
	nonce string
}

// text is a prompt of about n words for name.
func (p prompts) text(name string, n int) string {
	rng := rand.New(rand.NewPCG(seed(p.nonce, name), 0))
	parts := []string{p.nonce, name}
	for range n {
		parts = append(parts, words[rng.IntN(len(words))])
	}
	return strings.Join(parts, " ")
}

// ids is a token-id prompt of exactly n tokens for name: the router's
// tokenization of a text when it has the tokenizer, otherwise ids drawn
// from the plain range.
func (p prompts) ids(name string, n int) []int {
	if tok := p.r.tok; tok != nil {
		for words := n; ; words *= 2 {
			if ids := tok.Encode(p.text(name, words)); len(ids) >= n {
				return ids[:n]
			}
		}
	}
	lo, hi := plainIDLow, plainIDHigh
	if v := p.r.vocab; v > 0 {
		hi = min(hi, v)
		if lo >= hi {
			lo = 0
		}
	}
	rng := rand.New(rand.NewPCG(seed(p.nonce, name), 1))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = lo + rng.IntN(hi-lo)
	}
	return ids
}

// more is ids followed by n more tokens: a prompt that extends another.
func (p prompts) more(ids []int, name string, n int) []int {
	return append(append([]int(nil), ids...), p.ids(name, n)...)
}

func seed(nonce, name string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s", nonce, name)
	return h.Sum64()
}

// greedy is a whole completion request of prompt with temperature 0. It
// names no model: the engine's own is meant, as when a client names none.
func greedy(prompt protocol.Prompt) *protocol.CompletionRequest {
	return &protocol.CompletionRequest{Prompt: prompt, MaxTokens: new(maxTokens), Temperature: new(0.0)}
}
