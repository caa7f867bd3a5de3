package caddymlc

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
)

// failureLimiter counts failed key checks per client address: past limit
// in authWindow, the address is held (answered 429) for authWindow,
// which is logged once. Other addresses are not held up. With the
// cluster, every replica's failures count: each replica tells the others
// of its own over the cluster's bus (share), and counts theirs (seen),
// so that an address cannot guess limit times on every replica.
type failureLimiter struct {
	limit int // -1: no bound
	log   *zap.Logger
	share func(addr string) // tells the other replicas; nil: none

	mu    sync.Mutex
	by    map[string]*addrFailures
	swept time.Time
}

// addrFailures are one address's failures in its current window.
type addrFailures struct {
	start time.Time
	n     int
	until time.Time // held until then
}

func newFailureLimiter(limit int, log *zap.Logger) *failureLimiter {
	return &failureLimiter{limit: limit, log: log, by: map[string]*addrFailures{}}
}

// held says whether addr is held at now, and for how long still.
func (l *failureLimiter) held(addr string, now time.Time) (time.Duration, bool) {
	if l == nil || l.limit < 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.by[addr]
	if f == nil || !now.Before(f.until) {
		return 0, false
	}
	return f.until.Sub(now), true
}

// fail counts a failed check from addr at now, and tells the other
// replicas.
func (l *failureLimiter) fail(addr string, now time.Time) {
	if l == nil || l.limit < 0 {
		return
	}
	if l.share != nil {
		l.share(addr)
	}
	l.seen(addr, now)
}

// seen counts a failed check from addr at now, here or on another
// replica.
func (l *failureLimiter) seen(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	f := l.by[addr]
	if f == nil || now.Sub(f.start) >= authWindow {
		f = &addrFailures{start: now, until: timeOf(f)}
		l.by[addr] = f
	}
	f.n++
	if f.n > l.limit && !now.Before(f.until) {
		f.until = now.Add(authWindow)
		l.log.Warn("client address held: too many failed API key checks", zap.String("client", addr), zap.Int("failures", f.n),
			zap.Duration("window", authWindow), zap.Time("until", f.until))
	}
}

// timeOf is the end of the hold of f, zero without one.
func timeOf(f *addrFailures) time.Time {
	if f == nil {
		return time.Time{}
	}
	return f.until
}

// sweep forgets, once a window, the addresses whose window and hold
// are over: the map holds only the recent ones.
func (l *failureLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < authWindow {
		return
	}
	l.swept = now
	for addr, f := range l.by {
		if now.Sub(f.start) >= authWindow && !now.Before(f.until) {
			delete(l.by, addr)
		}
	}
}

// shareOver makes l tell the cluster's other replicas of its failures
// and count theirs; the returned func stops it.
func (l *failureLimiter) shareOver(fc *cluster.FailedChecks) (stop func()) {
	l.share = fc.Publish
	return fc.Follow(func(addr string) { l.seen(addr, time.Now()) })
}
