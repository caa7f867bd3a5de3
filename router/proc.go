package router

import (
	"errors"

	"go.uber.org/zap"
)

// proc is one process of an engine: what a call's verdict is about. A
// restarted engine is another process, which does not inherit the old
// one's failures (see breaker).
type proc struct {
	*Upstream
	pid int
}

// baseURL is where the engine's API is (callee).
func (p *proc) baseURL() string { return p.url }

// procKey names the process (callee): see avoidKey.
func (p *proc) procKey() string { return avoidKey(p.addr, p.pid) }

// alive reports that the engine still runs the process and is ready
// (callee): a call that waits on it is still being worked on.
func (p *proc) alive() bool {
	ready, pid := p.status()
	return ready && pid == p.pid
}

// verdict is what a call that ended says of the engine's health: the
// engine client tells it in its errors (engineError.verdict), and the
// call's owner reports it to the engine's breaker (proc.judge).
type verdict uint8

const (
	// noVerdict: the call says nothing of the engine (the caller left,
	// the router ran out of descriptors, an error event in a stream).
	noVerdict verdict = iota
	// verdictServed: the engine answered, if only to refuse the request
	// or to say it is busy (a preemption).
	verdictServed
	// verdictFailed: the engine failed the call (no connection, 5xx).
	verdictFailed
	// verdictBadAnswer: the engine answered, but not as an engine must
	// (engineError.bad says how).
	verdictBadAnswer
)

// verdictOf is the verdict of a call that ended with err, an error the
// engine client returned: noVerdict for nil or an error of another kind.
func verdictOf(err error) (verdict, *engineError) {
	var ee *engineError
	if err == nil || !errors.As(err, &ee) {
		return noVerdict, nil
	}
	return ee.verdict, ee
}

// judge reports to the engine's breaker the verdict of a call that
// ended with err; a nil err was served.
func (p *proc) judge(err error) {
	if err == nil {
		p.served()
		return
	}
	switch v, ee := verdictOf(err); v {
	case verdictServed:
		p.served()
	case verdictFailed:
		p.failed()
	case verdictBadAnswer:
		p.answerFailed(ee.bad)
	}
}

// working reports that the engine is at work on a call (it answered, or
// its stream moved): passive health for its fleet.
func (p *proc) working() { p.pool.procs.Served(p.index) }

// served reports a call the engine answered: passive health for the
// breaker and the fleet.
func (p *proc) served() {
	p.breaker.success(p.pid)
	p.pool.procs.Served(p.index)
	if p.badStream.Load() != nil {
		p.badStream.Store(nil)
	}
}

// answerFailed reports a call whose engine answered, but not as an engine
// must (malformed or truncated events, no finish, the wrong content type,
// no token within the engine timeout): a failure for the breaker, logged
// once per engine and reason until the engine serves a call well again.
func (p *proc) answerFailed(reason string) {
	if prev := p.badStream.Swap(&reason); prev == nil || *prev != reason {
		p.pool.Log().Warn("engine answered badly", addrField(p.Upstream), zap.Int("pid", p.pid), zap.String("reason", reason))
	}
	p.failed()
}

// failed reports a call the engine failed.
func (p *proc) failed() {
	if p.breaker.failure(p.pid) {
		p.pool.Log().Warn("engine taken out of rotation after failures in a row",
			addrField(p.Upstream), zap.Int("pid", p.pid), zap.Int("failures", breakerThreshold))
		p.pool.Wake()
	}
}

// forgive takes back the last failure recorded: it turned out to be
// another engine's.
func (p *proc) forgive() { p.breaker.forgive(p.pid) }
