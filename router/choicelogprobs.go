package router

import "github.com/caddy-mlc/caddy-mlc/protocol"

// choiceLogprobs carries the logprobs of a choice's tokens from the
// attempts that computed them to the client.
//
// An engine sends each token's entry with the chunk that holds the token's
// text. The router may hold some of that text back (the stop scanner) and
// may lose it (an attempt that fails drops what was held back, and the
// next attempt generates it again). So entries wait here, each with the
// span of its token's text in the choice's generated text, and go out
// with the text they belong to: once the client has all of a token's text;
// at a stop string, every token whose text starts before it (a token that
// straddles the cut stays, as its text partly does); after a failed
// attempt, the tokens whose text was partly delivered (the next attempt
// continues after it), while the others are forgotten with their text.
// Each delivered token thus keeps the entry of the attempt that produced
// it.
type choiceLogprobs struct {
	want bool
	echo int // bytes of echoed prompt before the generated text, in the client's text
	held []heldLogprob
}

// heldLogprob is a token's entry and the span [start, end) of its text in
// the choice's generated text. A token that produced no text of its own
// (the first bytes of a character) ends where the token that completes the
// character ends, so that it goes out with it.
type heldLogprob struct {
	start, end int
	token      string
	logprob    float64
	top        protocol.TopLogprobs
}

func newChoiceLogprobs(want bool) *choiceLogprobs { return &choiceLogprobs{want: want} }

// add takes the entries of an engine's chunk whose text is [from, to) of
// the generated text, from an attempt whose text began at base. Engines
// give each entry the offset of its token's text in the attempt's text;
// an offset outside the chunk (an engine that counts otherwise) is taken
// as the chunk's start, and offsets never go back.
func (q *choiceLogprobs) add(lp *protocol.CompletionLogprobs, base, from, to int) {
	if !q.want || lp.Len() == 0 {
		return
	}
	first := len(q.held)
	at := from
	for i, tok := range lp.Tokens {
		if i < len(lp.TextOffset) {
			if off := base + lp.TextOffset[i]; off >= at && off <= to {
				at = off
			}
		}
		e := heldLogprob{start: at, token: tok}
		if i < len(lp.TokenLogprobs) {
			e.logprob = lp.TokenLogprobs[i]
		}
		if i < len(lp.TopLogprobs) {
			e.top = lp.TopLogprobs[i]
		}
		q.held = append(q.held, e)
	}
	// Each token's text ends where the next token's begins, the last
	// one's at the end of the chunk; a token without text of its own ends
	// with the next one.
	added := q.held[first:]
	end := to
	for i := len(added) - 1; i >= 0; i-- {
		added[i].end = end
		if i > 0 && added[i-1].start < added[i].start {
			end = added[i].start
		}
	}
}

// take removes and returns the entries of the tokens whose text is all
// within the first delivered bytes.
func (q *choiceLogprobs) take(delivered int) *protocol.CompletionLogprobs {
	n := 0
	for n < len(q.held) && q.held[n].end <= delivered {
		n++
	}
	return q.pop(n)
}

// cut ends the text at byte at: it returns the entries of the tokens whose
// text starts before it and forgets the others.
func (q *choiceLogprobs) cut(at int) *protocol.CompletionLogprobs {
	n := 0
	for n < len(q.held) && q.held[n].start < at {
		n++
	}
	out := q.pop(n)
	q.held = q.held[:0]
	return out
}

// resume prepares for an attempt that continues after the first delivered
// bytes: the entries of tokens whose text starts there or later are
// forgotten with that text; a token whose text was partly delivered keeps
// its entry, which goes out with the next text.
func (q *choiceLogprobs) resume(delivered int) {
	n := 0
	for n < len(q.held) && q.held[n].start < delivered {
		q.held[n].end = min(q.held[n].end, delivered)
		n++
	}
	q.held = q.held[:n]
}

// none is the logprobs of text without tokens of the choice's own (the
// echoed prompt): empty when the request asked for logprobs, else nil.
func (q *choiceLogprobs) none() *protocol.CompletionLogprobs {
	if !q.want {
		return nil
	}
	return protocol.NewCompletionLogprobs(0)
}

// pop removes the first n entries and returns them in the completion
// shape, their offsets in the client's text; nil when the request did not
// ask for logprobs.
func (q *choiceLogprobs) pop(n int) *protocol.CompletionLogprobs {
	if !q.want {
		return nil
	}
	out := protocol.NewCompletionLogprobs(n)
	for _, e := range q.held[:n] {
		out.TextOffset = append(out.TextOffset, q.echo+e.start)
		out.TokenLogprobs = append(out.TokenLogprobs, e.logprob)
		out.Tokens = append(out.Tokens, e.token)
		top := e.top
		if top == nil {
			top = protocol.TopLogprobs{}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
	}
	q.held = q.held[n:]
	return out
}

// withOffsets returns lp with the offsets of its tokens in the attempt's
// text, for an engine that sent none (MLC's engine sends text_offset
// null) in a chunk whose text starts at byte from of the attempt's text:
// the tokens' own strings where they spell the chunk's text, else the
// router's tokenization of the text where it has as many tokens; else
// lp as it is (add then starts every token at the chunk's start). An
// engine's offsets are kept.
func withOffsets(lp *protocol.CompletionLogprobs, text string, from int, tok Tokenizer) *protocol.CompletionLogprobs {
	n := lp.Len()
	if n == 0 || len(lp.TextOffset) >= n {
		return lp
	}
	lens := make([]int, n)
	spelled := 0
	for i, t := range lp.Tokens {
		lens[i] = len(t)
		spelled += len(t)
	}
	if spelled != len(text) && tok != nil {
		ids := tok.Encode(text)
		if len(ids) != n {
			return lp
		}
		spelled = 0
		for i := range ids {
			lens[i] = len(tok.Decode(ids[i : i+1]))
			spelled += lens[i]
		}
	}
	if spelled != len(text) {
		return lp
	}
	out := *lp
	out.TextOffset = make([]int, n)
	at := from
	for i, l := range lens {
		out.TextOffset[i] = at
		at += l
	}
	return &out
}
