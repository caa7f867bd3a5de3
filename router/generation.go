package router

import (
	"context"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// reader reads the generation of the engine that makes an attempt's text.
// It returns nil when the engine's part ended well (its finish reason, a
// preemption, or a choice complete before the stream's end), else why the
// attempt ended.
type reader func(g *generation) error

// generation is a leased engine's completion call as an attempt reads it:
// what its stream shows of the engine (at work, its first token, its load
// in the final usage) goes to the lease as it comes.
type generation struct {
	s     *chunkStream
	l     *lease
	usage *protocol.Usage // the engine's final usage, once it came
}

// generate starts a completion call on the engine of l, the caller's
// lease: a stream, or, for a request that does not stream, its one answer
// (see engineClient.generate). On error the engine's verdict is reported
// and the route fails; otherwise the caller has it read (consume).
func (r *Router) generate(ctx context.Context, l *lease, path string, body any, stream bool) (*generation, error) {
	s, err := r.client.generate(ctx, l, path, body, stream)
	if err != nil {
		l.judge(err)
		l.fail(err)
		return nil, err
	}
	l.working() // it answered; how well, its stream will tell
	return &generation{s: s, l: l}, nil
}

// consume has read read the generation, then reports what became of the
// call (the engine's verdict, the route's end) and closes it.
func (g *generation) consume(read reader) error {
	defer g.s.close()
	err := read(g)
	switch v, _ := verdictOf(err); {
	case v != noVerdict:
		g.l.judge(err)
	case g.s.complete():
		g.l.served()
	}
	if err == nil {
		g.l.finish(g.usage)
	} else {
		g.l.fail(err)
	}
	return err
}

// next returns the next chunk, io.EOF after the stream's end, or the
// error that broke it (see chunkStream.next).
func (g *generation) next() (*protocol.CompletionResponse, error) {
	c, err := g.s.next()
	if err != nil {
		return nil, err
	}
	if g.s.moved {
		g.l.working()
		g.l.firstToken()
		g.l.tokenCame()
	}
	if c.Usage != nil {
		g.usage = c.Usage
		// The built-in engine reports its load as the request ends,
		// which it no longer counts; our own count still holds it
		// until the lease is released.
		g.l.report(c.Usage.Extra, g.l.inflight.Load()-1)
	}
	return c, nil
}

// pending reports that the next chunk has already arrived.
func (g *generation) pending() bool { return g.s.pending() }

// addr is the engine's host:port.
func (g *generation) addr() string { return g.l.addr }

// post makes a call answered in JSON on the engine's process p and
// reports the engine's verdict on it.
func (r *Router) post(ctx context.Context, p *proc, path string, body, out any) error {
	err := r.client.post(ctx, p, path, body, out)
	p.judge(err)
	return err
}
