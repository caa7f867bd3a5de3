package builtin

import (
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/internal/stopscan"
)

// output turns a sequence's generated tokens into the text handed to its
// client. Tokens are detokenized one at a time (a StreamDecoder, which
// holds back incomplete characters), and the text passes the request's
// stop strings (a stopscan.Scanner, which holds back what may still become
// one and cuts the text before the first). Both cost O(1) per token,
// amortised, however long the text grows. When the request asks for
// logprobs, a token's entry waits until the text it produced is handed
// out, and goes out with that text.
type output struct {
	dec     *tokenizer.StreamDecoder
	stop    *stopscan.Scanner
	decoded int            // bytes of text the decoder produced
	sent    int            // bytes of text handed out
	held    []tokenLogprob // entries of tokens whose text is not all handed out
	done    bool           // the text ended (a stop string, or flushed)
}

// piece is text to hand out and the logprobs of the tokens it completes.
type piece struct {
	text     string
	logprobs []tokenLogprob
}

func newOutput(tok Tokenizer, stop []string) *output {
	return &output{dec: tokenizer.NewStreamDecoder(tok), stop: stopscan.New(stop)}
}

// push adds a generated token, with its logprobs entry when the request
// asks for them (else nil), and returns what may be handed out now, and
// whether a stop string ended the text.
func (o *output) push(id int, lp *tokenLogprob) (piece, bool) {
	if o.done {
		return piece{}, true
	}
	text := o.dec.Push(id)
	if lp != nil {
		lp.start, lp.end = o.decoded, o.decoded+len(text)
		o.held = append(o.held, *lp)
	}
	o.decoded += len(text)
	out, hit := o.stop.Push(text)
	o.sent += len(out)
	if hit {
		o.done = true
		return piece{out, o.takeStartedBefore(o.sent)}, true
	}
	return piece{out, o.takeCompleted()}, false
}

// flush ends the text without a stop string: it hands out everything held
// back (an incomplete character as U+FFFD), unless a stop string turns up
// in it.
func (o *output) flush() piece {
	if o.done {
		return piece{}
	}
	o.done = true
	text := o.dec.Flush()
	o.decoded += len(text)
	out, hit := o.stop.Push(text)
	if !hit {
		out += o.stop.Flush()
	}
	o.sent += len(out)
	return piece{out, o.takeStartedBefore(o.sent)}
}

// takeCompleted removes and returns the entries up to the last token whose
// text is all handed out. Tokens that produced no text yet (the first
// bytes of a character) go out with the token that completes it.
func (o *output) takeCompleted() []tokenLogprob {
	n := 0
	for i, lp := range o.held {
		if lp.end > o.sent {
			break
		}
		if lp.end > lp.start {
			n = i + 1
		}
	}
	return o.take(n)
}

// takeStartedBefore removes the held entries and returns those of the
// tokens whose text starts before end: the text ends there, and tokens
// after it are not part of it.
func (o *output) takeStartedBefore(end int) []tokenLogprob {
	n := 0
	for n < len(o.held) && o.held[n].start < end {
		n++
	}
	out := o.take(n)
	o.held = nil
	return out
}

// take removes and returns the first n held entries.
func (o *output) take(n int) []tokenLogprob {
	if n == 0 {
		return nil
	}
	out := o.held[:n:n]
	o.held = o.held[n:]
	return out
}
