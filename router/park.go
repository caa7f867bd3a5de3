package router

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/watchdog"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A client that stops reading must cost the others nothing. Until
// client_timeout lets it go, its stream would hold a place in an engine's
// batch and generate into socket buffers for nobody, slowing every other
// request on that engine. So a choice whose write to its client waits
// parkAfter parks: its attempt is cancelled, which frees the engine's
// batch slot and KV, and once the client takes the write the choice
// resumes from the text delivered, as after a preemption.

// parkAfter is how long a write to the client may wait before the
// choice's attempt is parked. A client's short pause (a mobile hand-over,
// a busy reader) stays well under it; a re-prefill of what was parked
// costs less than a batch slot held for seconds.
const parkAfter = 2 * time.Second

// errParked ends an attempt whose client stopped reading; the choice
// resumes when the client reads again. It is a cancellation, which blames
// no engine. A value of its own type, so no package state holds it.
type errParked struct{}

func (errParked) Error() string { return "the client stopped reading: the attempt is parked" }

// Unwrap makes it a cancellation (errors.Is(err, context.Canceled)).
func (errParked) Unwrap() error { return context.Canceled }

// parkingSink is the sink of one attempt: a write that waits parkAfter
// cancels the attempt's engine call (with errParked as its cause). A write
// notes when it began, which a timer looks at every parkAfter: a stream's
// chunks cost two clock reads, not a timer's reset each.
type parkingSink struct {
	sink
	began  time.Time
	cancel context.CancelCauseFunc
	dog    *watchdog.Dog
	// writing is when the write under way began, after began, plus one
	// nanosecond; 0: none is.
	writing atomic.Int64
	parked  atomic.Bool
}

// newParkingSink returns the sink that parks the attempt cancel cancels.
func newParkingSink(out sink, cancel context.CancelCauseFunc) *parkingSink {
	p := &parkingSink{sink: out, began: time.Now(), cancel: cancel}
	p.dog = watchdog.Start(parkAfter, p.check)
	return p
}

// check parks the attempt if a write has waited parkAfter; else it
// returns when one could have.
func (p *parkingSink) check() time.Duration {
	w := p.writing.Load()
	if w == 0 {
		return parkAfter
	}
	if waited := time.Since(p.began) - time.Duration(w-1); waited < parkAfter {
		return parkAfter - waited
	}
	p.parked.Store(true)
	p.cancel(errParked{})
	return 0
}

func (p *parkingSink) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	p.writing.Store(int64(time.Since(p.began)) + 1)
	defer p.writing.Store(0)
	return p.sink.delta(index, text, logprobs)
}

func (p *parkingSink) flush() {
	p.writing.Store(int64(time.Since(p.began)) + 1)
	defer p.writing.Store(0)
	p.sink.flush()
}

// stop ends the sink's watch: the attempt is over.
func (p *parkingSink) stop() { p.dog.Stop() }

// canPark reports whether the choice may park its attempts: a stream
// (a whole answer writes nothing until the end) whose text can be
// resumed, under a client_timeout that leaves time to park first. A
// response format is resumed exactly only by engines that read
// resumed_tokens (caddy-mlc's extension): against MLC's, a structured
// answer is never parked, since parking is the router's choice and its
// resumption would restart the grammar.
func (j *choiceJob) canPark() bool {
	if !j.grammarResumes() {
		return false
	}
	return j.c.req.Stream && j.tok != nil && time.Duration(j.c.r.ClientTimeout) > parkAfter
}

// parked reports whether out parked its attempt.
func parked(out sink) bool {
	p, ok := out.(*parkingSink)
	return ok && p.parked.Load()
}

// causeParked is the retry cause of the attempt that resumes a parked
// choice (caddy_mlc_retries_total{cause="parked"}).
const causeParked = "parked"
