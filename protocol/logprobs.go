package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Log probabilities, in the two shapes MLC-LLM's protocol models give them
// (python/mlc_llm/protocol/openai_api_protocol.py): CompletionLogProbs for
// /v1/completions, LogProbs for /v1/chat/completions. Engines always answer
// the completion shape, since the router drives them through completions;
// the router turns it into the chat shape for chat clients.

// Bounds of the number of alternatives a request may ask for.
const (
	// MaxCompletionLogprobs bounds a completion request's logprobs.
	MaxCompletionLogprobs = 5
	// MaxChatTopLogprobs bounds a chat request's top_logprobs.
	MaxChatTopLogprobs = 20
)

// TokenLogprob is one token and its log probability.
type TokenLogprob struct {
	Token   string
	Logprob float64
}

// TopLogprobs are the most likely tokens at one position, most likely
// first. On the wire it is a JSON object from token to log probability
// (MLC's Dict[str, float]) written and read in that order.
type TopLogprobs []TokenLogprob

// MarshalJSON writes the object in order.
func (t TopLogprobs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, tl := range t {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(tl.Token)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(tl.Logprob)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object, keeping its order.
func (t *TopLogprobs) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("top_logprobs: want an object, got %v", tok)
	}
	*t = (*t)[:0]
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v float64
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*t = append(*t, TokenLogprob{Token: k.(string), Logprob: v})
	}
	_, err = dec.Token() // the closing brace
	return err
}

// CompletionLogprobs are the log probabilities of a completion choice's
// tokens (MLC's CompletionLogProbs, OpenAI's completions shape); in a
// stream, of the tokens of one chunk.
type CompletionLogprobs struct {
	// TextOffset is each token's byte offset in the text the client
	// receives (the echoed prompt, if any, and the completion so far).
	TextOffset    []int         `json:"text_offset"`
	TokenLogprobs []float64     `json:"token_logprobs"`
	Tokens        []string      `json:"tokens"`
	TopLogprobs   []TopLogprobs `json:"top_logprobs"`
}

// NewCompletionLogprobs returns logprobs of no tokens, room for n, whose
// lists are written as [] (MLC's model requires lists, not null).
func NewCompletionLogprobs(n int) *CompletionLogprobs {
	return &CompletionLogprobs{TextOffset: make([]int, 0, n), TokenLogprobs: make([]float64, 0, n),
		Tokens: make([]string, 0, n), TopLogprobs: make([]TopLogprobs, 0, n)}
}

// Len returns the number of tokens; a nil c has none.
func (c *CompletionLogprobs) Len() int {
	if c == nil {
		return 0
	}
	return len(c.Tokens)
}

// Append adds the tokens of more after c's: the logprobs of a whole
// choice are those of its chunks, in order.
func (c *CompletionLogprobs) Append(more *CompletionLogprobs) {
	if more == nil {
		return
	}
	c.TextOffset = append(c.TextOffset, more.TextOffset...)
	c.TokenLogprobs = append(c.TokenLogprobs, more.TokenLogprobs...)
	c.Tokens = append(c.Tokens, more.Tokens...)
	c.TopLogprobs = append(c.TopLogprobs, more.TopLogprobs...)
}

// ChatLogprobs are the log probabilities of a chat choice's tokens (MLC's
// and OpenAI's LogProbs).
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
}

// ChatTokenLogprob is one token of a chat choice (MLC's LogProbsContent).
type ChatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []ChatTopLogprob `json:"top_logprobs"`
}

// ChatTopLogprob is one alternative at a position (MLC's TopLogProbs).
type ChatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Chat returns the logprobs in the chat shape.
func (c CompletionLogprobs) Chat() ChatLogprobs {
	out := ChatLogprobs{Content: make([]ChatTokenLogprob, len(c.Tokens))}
	for i, tok := range c.Tokens {
		e := ChatTokenLogprob{Token: tok, Bytes: tokenBytes(tok), TopLogprobs: []ChatTopLogprob{}}
		if i < len(c.TokenLogprobs) {
			e.Logprob = c.TokenLogprobs[i]
		}
		if i < len(c.TopLogprobs) {
			for _, tl := range c.TopLogprobs[i] {
				e.TopLogprobs = append(e.TopLogprobs, ChatTopLogprob{Token: tl.Token, Logprob: tl.Logprob, Bytes: tokenBytes(tl.Token)})
			}
		}
		out.Content[i] = e
	}
	return out
}

// tokenBytes is the UTF-8 encoding of a token's text, as a list of ints.
func tokenBytes(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}
