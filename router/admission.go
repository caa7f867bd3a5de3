package router

import (
	"context"
	"net/http"
	"runtime"
	"time"
	"unicode/utf8"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Admission is what a request costs the router before any engine is
// asked: reading, decoding and tokenizing its body. A few large bodies
// (a 3 MB prompt takes about a second to tokenize) must not starve the
// streams, the health probes and the engines of the CPU, so bodies over
// largeBody are decoded and tokenized a few at a time (largeSlots), and a
// prompt that overflows the context is refused from a prefix of it.

// largeBody is the body size from which a request takes a large slot:
// a body below it decodes and tokenizes in well under a millisecond.
const largeBody = 64 << 10

// largeSlots bounds the large requests prepared at once: half the CPUs,
// at least one, so that the rest keep serving.
var largeSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// probeBytesPerToken sizes the prefix of a long prompt that is tokenized
// first: context tokens times this many bytes. Text averages about four
// bytes a token; a prompt whose prefix already holds more tokens than the
// context is refused without tokenizing the rest.
const probeBytesPerToken = 8

// readBody reads hreq's body. A large one waits for a large slot
// (bounded by the queue timeout) before it is decoded; release gives
// the slot back once the request is tokenized.
func (r *Router) readBody(hreq *http.Request) (body []byte, release func(), e *protocol.Error) {
	b, e := protocol.ReadBody(hreq.Body, r.maxBody())
	if e != nil {
		return nil, nil, e
	}
	if len(b) < largeBody {
		return b, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(hreq.Context(), time.Duration(r.QueueTimeout))
	defer cancel()
	select {
	case largeSlots <- struct{}{}:
		return b, func() { <-largeSlots }, nil
	case <-ctx.Done():
		if hreq.Context().Err() != nil {
			return nil, nil, protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeServer, "request canceled")
		}
		e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
			"too many large requests are being prepared; retry later")
		e.RetryAfter = retryAfter
		return nil, nil, e
	}
}

// encode tokenizes a prompt's text. When the context is known and the
// text longer than its probe, the probe is tokenized first: a prompt that
// overflows the context there is refused at once (the cut may split a
// token in two, hence the one token of slack).
func (r *Router) encode(text string) ([]int, *protocol.Error) {
	if probe := r.context * probeBytesPerToken; r.context > 0 && len(text) > probe {
		for probe > 0 && !utf8.RuneStart(text[probe]) {
			probe--
		}
		if n := len(r.tok.Encode(text[:probe])) - 1; n >= r.context {
			return nil, protocol.PromptTooLongAtLeast(n, r.context)
		}
	}
	return r.tok.Encode(text), nil
}
