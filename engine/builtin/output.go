package builtin

import (
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/internal/stopscan"
)

// output turns a sequence's generated tokens into the text handed to its
// client, as MLC's engine does. Tokens first pass the request's stop
// strings (a stopscan.Handler over the tokens' post-processed texts,
// MLC's StopStrHandler), which holds back tokens that may still start one
// and, at a stop string, drops the token it begins in and every later
// one. The tokens it releases are detokenized one at a time (a
// StreamDecoder, MLC's TextStreamer, which holds back incomplete
// characters). Both cost O(1) per token, amortised, however long the text
// grows. When the request asks for logprobs, a token's entry waits until
// the text it produced is handed out, and goes out with that text; a
// dropped token's entry is dropped with it.
type output struct {
	dec     *tokenizer.StreamDecoder
	stop    *stopscan.Handler
	table   func(id int) string // a token's text as stop strings see it
	pending []heldToken         // tokens the stop handler holds, oldest first
	decoded int                 // bytes of text the decoder produced, all handed out
	held    []tokenLogprob      // entries of released tokens whose text is not all out
	done    bool                // the text ended (a stop string, or flushed)
}

// heldToken is a token the stop handler holds, and its logprobs entry
// when the request asks for them.
type heldToken struct {
	id int
	lp *tokenLogprob
}

// piece is text to hand out and the logprobs of the tokens it completes.
type piece struct {
	text     string
	logprobs []tokenLogprob
}

// newOutput returns the output of a sequence that decodes with tok and
// matches stop against the texts table gives tokens.
func newOutput(tok Tokenizer, table func(id int) string, stop []string) *output {
	return &output{dec: tokenizer.NewStreamDecoder(tok), stop: stopscan.NewHandler(stop), table: table}
}

// newOutput returns an output of the engine's model for stop.
func (e *Engine) newOutput(stop []string) *output {
	return newOutput(e.tok, tableText(e.tok), stop)
}

// push adds a generated token, with its logprobs entry when the request
// asks for them (else nil), and returns what may be handed out now, and
// whether a stop string ended the text.
func (o *output) push(id int, lp *tokenLogprob) (piece, bool) {
	if o.done {
		return piece{}, true
	}
	o.pending = append(o.pending, heldToken{id, lp})
	n := len(o.stop.Put(o.table(id)))
	text := o.decode(n)
	if o.stop.Triggered() {
		// The text ends before the token in which the stop string
		// begins; the decoder gives up what it held, as MLC's
		// TextStreamer does when the generation finishes.
		o.done = true
		o.pending = nil
		text += o.flushDecoder()
		return piece{text, o.take(len(o.held))}, true
	}
	return piece{text, o.takeCompleted()}, false
}

// flush ends the text without a stop string: it hands out every token the
// stop handler holds, and what the decoder holds (an incomplete character
// as U+FFFD).
func (o *output) flush() piece {
	if o.done {
		return piece{}
	}
	o.done = true
	text := o.decode(len(o.stop.Finish()))
	text += o.flushDecoder()
	return piece{text, o.take(len(o.held))}
}

// decode detokenizes the first n pending tokens, which the stop handler
// released, and returns their text.
func (o *output) decode(n int) string {
	text := ""
	for _, t := range o.pending[:n] {
		s := o.dec.Push(t.id)
		if t.lp != nil {
			t.lp.start, t.lp.end = o.decoded, o.decoded+len(s)
			o.held = append(o.held, *t.lp)
		}
		o.decoded += len(s)
		text += s
	}
	o.pending = o.pending[n:]
	return text
}

// flushDecoder returns what the decoder holds back; the last entry's text
// ends with it.
func (o *output) flushDecoder() string {
	s := o.dec.Flush()
	if len(o.held) > 0 {
		o.held[len(o.held)-1].end += len(s)
	}
	o.decoded += len(s)
	return s
}

// takeCompleted removes and returns the entries up to the last token that
// produced text. Tokens that produced none yet (the first bytes of a
// character) go out with the token that completes it.
func (o *output) takeCompleted() []tokenLogprob {
	n := 0
	for i, lp := range o.held {
		if lp.end > lp.start {
			n = i + 1
		}
	}
	return o.take(n)
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
