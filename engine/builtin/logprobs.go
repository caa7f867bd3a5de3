package builtin

import (
	"math"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Logprobs are those of the distribution the token was chosen from before
// temperature and top_p: the log-softmax of the logits after logit_bias
// and the presence and frequency penalties, over the ids the model may
// sample. OpenAI's logprobs do not depend on the temperature either. MLC
// takes them from the probabilities its sampler draws from, the softmax of
// the logits divided by the temperature (before top_p): at temperature 0,
// greedy decoding, that distribution is one-hot and its logprobs say
// nothing (0 for the chosen token, -inf for every other), so the built-in
// engine does not follow it there.

// tokenLogprob is one generated token's logprobs entry.
type tokenLogprob struct {
	token   string
	logprob float64
	top     protocol.TopLogprobs // the k most likely tokens, most likely first
	// start and end delimit the token's text in the completion: the bytes
	// the detokenizer produced when it came (the first bytes of a
	// character produce none; the token that completes it, all of it).
	start, end int
}

// tokenStringer is implemented by tokenizers whose decoding is the
// concatenation of token strings (the tiny one).
type tokenStringer interface {
	Token(id int) string
}

// tokenText is the text of id decoded alone.
func (e *Engine) tokenText(id int) string {
	if ts, ok := e.tok.(tokenStringer); ok {
		return ts.Token(id)
	}
	return e.tok.Decode([]int{id})
}

// logprobOf returns the entry of the chosen id with its k most likely
// alternatives, from logits as the sampler adjusted them.
func (e *Engine) logprobOf(logits []float32, id, k int) *tokenLogprob {
	maxL := math.Inf(-1)
	for i, l := range logits {
		if e.allowed[i] {
			maxL = max(maxL, float64(l))
		}
	}
	var sum float64
	for i, l := range logits {
		if e.allowed[i] {
			sum += math.Exp(float64(l) - maxL)
		}
	}
	lse := maxL + math.Log(sum)
	lp := &tokenLogprob{token: e.tokenText(id), logprob: float64(logits[id]) - lse, top: protocol.TopLogprobs{}}
	for _, alt := range topK(logits, e.allowed, k) {
		lp.top = append(lp.top, protocol.TokenLogprob{Token: e.tokenText(alt), Logprob: float64(logits[alt]) - lse})
	}
	return lp
}

// topK returns the k allowed ids of the highest logits, highest first; on
// a tie the lower id comes first, as greedy decoding chooses.
func topK(logits []float32, allowed []bool, k int) []int {
	if k <= 0 {
		return nil
	}
	top := make([]int, 0, k+1)
	for id, l := range logits {
		if !allowed[id] || (len(top) == k && l <= logits[top[k-1]]) {
			continue
		}
		i := len(top)
		for i > 0 && l > logits[top[i-1]] {
			i--
		}
		top = append(top, 0)
		copy(top[i+1:], top[i:])
		top[i] = id
		top = top[:min(len(top), k)]
	}
	return top
}

// completionLogprobs is the wire form of entries.
func completionLogprobs(entries []tokenLogprob) *protocol.CompletionLogprobs {
	c := &protocol.CompletionLogprobs{
		TextOffset: []int{}, TokenLogprobs: []float64{}, Tokens: []string{}, TopLogprobs: []protocol.TopLogprobs{},
	}
	for _, lp := range entries {
		c.TextOffset = append(c.TextOffset, lp.start)
		c.TokenLogprobs = append(c.TokenLogprobs, lp.logprob)
		c.Tokens = append(c.Tokens, lp.token)
		c.TopLogprobs = append(c.TopLogprobs, lp.top)
	}
	return c
}
