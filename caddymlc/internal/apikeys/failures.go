package apikeys

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
)

// Window is the window of a FailureLimiter's limit, and how long an
// address that went past it is held.
const Window = time.Minute

// FailureLimiter counts wrong keys per client address: past limit in
// Window, the address is held for Window, which is logged once; while
// held, its wrong keys are answered 429 rather than 401. Holding never
// refuses a valid key: the caller checks every key, and asks Held only
// of a wrong one (an address can be shared, behind a NAT, by clients
// with valid keys). Other addresses are not held up. With the cluster,
// every site's and replica's failures count: each limiter tells the
// others of its own (share), and counts theirs (seen).
type FailureLimiter struct {
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

// NewFailureLimiter holds an address past limit failed checks in a
// Window (-1: never).
func NewFailureLimiter(limit int, log *zap.Logger) *FailureLimiter {
	return &FailureLimiter{limit: limit, log: log, by: map[string]*addrFailures{}}
}

// Held says whether addr is held at now, and for how long still.
func (l *FailureLimiter) Held(addr string, now time.Time) (time.Duration, bool) {
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

// Fail counts a wrong key from addr at now, and tells the other
// limiters.
func (l *FailureLimiter) Fail(addr string, now time.Time) {
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
func (l *FailureLimiter) seen(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	f := l.by[addr]
	if f == nil || now.Sub(f.start) >= Window {
		f = &addrFailures{start: now, until: timeOf(f)}
		l.by[addr] = f
	}
	f.n++
	if f.n > l.limit && !now.Before(f.until) {
		f.until = now.Add(Window)
		l.log.Warn("client address held: too many wrong API keys; its wrong keys are answered 429, its valid keys served", zap.String("client", addr), zap.Int("failures", f.n),
			zap.Duration("window", Window), zap.Time("until", f.until))
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
func (l *FailureLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < Window {
		return
	}
	l.swept = now
	for addr, f := range l.by {
		if now.Sub(f.start) >= Window && !now.Before(f.until) {
			delete(l.by, addr)
		}
	}
}

// ShareOver makes l tell the other limiters following fc (the other
// sites', the other replicas') of its failures, and count theirs; the
// returned func stops it.
func (l *FailureLimiter) ShareOver(fc *cluster.FailedChecks) (stop func()) {
	w := fc.Follow(func(addr string) { l.seen(addr, time.Now()) })
	l.share = w.Publish
	return w.Stop
}
