package router

import (
	"context"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// attempt is one try of a choice on the engines, as the mode's strategy
// started it: the stream of the engine that makes the text, and the lease
// that holds that engine. It is to the retry loop what a response is to
// reverse_proxy: the loop reads it (next) and closes it (Close), once,
// which reports what became of the call and releases the lease. What the
// strategy held only to start it (a prefill engine) it released itself.
type attempt struct {
	s     *chunkStream
	l     *lease
	usage *protocol.Usage // the engine's final usage, once it came
	// cached is what the engines reused of the prompt when the strategy
	// knows it better than the usage will (disagg); -1: see reused.
	cached int
	// expected is what the router expected the engines to reuse
	// (cacheaccount.go); -1: it did not account.
	expected int
}

// startAttempt starts a completion call on the engine of l: a stream, or,
// for a request that does not stream, its one answer (see
// engineClient.generate). The attempt owns l from then on; on error the
// engine's verdict is reported and the route fails, and l stays the
// caller's to release.
func startAttempt(ctx context.Context, c *engineClient, l *lease, path string, body any, stream bool) (*attempt, error) {
	s, err := c.generate(ctx, l, path, body, stream)
	if err != nil {
		l.judge(err)
		l.fail(err)
		return nil, err
	}
	l.working() // it answered; how well, its stream will tell
	return &attempt{s: s, l: l, cached: -1, expected: l.expectedCached()}, nil
}

// next returns the next chunk, io.EOF after the stream's end, or the
// error that broke it (see chunkStream.next). What the stream shows of
// the engine (at work, its first token, its load in the final usage) goes
// to the lease as it comes.
func (a *attempt) next() (*protocol.CompletionResponse, error) {
	c, err := a.s.next()
	if err != nil {
		return nil, err
	}
	if a.s.moved {
		a.l.working()
		a.l.firstToken()
		a.l.tokenCame()
	}
	if a.cached < 0 && a.s.matched >= 0 {
		a.cached = a.s.matched // the built-in engine said it early
	}
	if c.Usage != nil {
		a.usage = c.Usage
		// The built-in engine reports its load as the request ends,
		// which it no longer counts; our own count still holds it
		// until the lease is released.
		a.l.report(c.Usage.Extra, a.l.inflight.Load()-1)
	}
	return c, nil
}

// pending reports that the next chunk has already arrived.
func (a *attempt) pending() bool { return a.s.pending() }

// Close ends the attempt: the engine's verdict on the call and the
// route's end are reported, the stream is closed and the lease released.
// err is why reading ended, nil when the engine's part ended well (its
// finish reason, a preemption, or a choice complete before the stream's
// end).
func (a *attempt) Close(err error) {
	switch v, _ := verdictOf(err); {
	case v != noVerdict:
		a.l.judge(err)
	case a.s.complete():
		a.l.served()
	}
	if err == nil {
		a.l.finish(a.usage)
	} else {
		a.l.fail(err)
	}
	a.s.close()
	a.l.release(err)
}
