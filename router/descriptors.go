package router

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Reasons of caddy_mlc_clients_dropped_total for want of descriptors:
// requests refused because the process could not open a connection to an
// engine, and clients a listener could not accept (see DropNotAccepted).
const (
	dropNoDescriptors = "no_descriptors"
	dropNotAccepted   = "not_accepted"
)

// OutOfDescriptors reports a call that failed because the process
// (EMFILE) or the system (ENFILE) is out of file descriptors: an engine
// call, or an accept of the adapter's listener wrapper.
func OutOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// DropNotAccepted counts a client a listener could not accept for want
// of a descriptor, and answered NoDescriptorsError (or closed, where it
// could not answer).
func DropNotAccepted() { sharedMetrics().dropped.WithLabelValues(dropNotAccepted).Inc() }

// NoDescriptorsError is the answer to a client the process has no file
// descriptor for: a 503 no_descriptors with Retry-After.
func NoDescriptorsError() *protocol.Error {
	e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
		"the server is out of file descriptors; retry later").WithCode(dropNoDescriptors)
	e.RetryAfter = retryAfter
	return e
}

// descriptorLog rate-limits the log of running out of descriptors: once
// every descriptorLogEvery, with how many requests it cost meanwhile.
var descriptorLog struct {
	last    atomic.Int64 // unix nanoseconds of the last line
	dropped atomic.Int64 // requests refused since
}

const descriptorLogEvery = 10 * time.Second

// noDescriptors is the answer to a request the router could not send to
// an engine for want of file descriptors: a fast 503 with Retry-After,
// counted and logged (rate-limited). It blames no engine (the breaker
// would take healthy engines out of rotation) and is not retried on
// another engine, which would need a descriptor too; service returns on
// its own as connections close.
func noDescriptors(log *zap.Logger, err error) *protocol.Error {
	metrics := sharedMetrics()
	metrics.dropped.WithLabelValues(dropNoDescriptors).Inc()
	n := descriptorLog.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := descriptorLog.last.Load(); now-last >= int64(descriptorLogEvery) && descriptorLog.last.CompareAndSwap(last, now) {
		descriptorLog.dropped.Add(-n)
		if log != nil {
			log.Error("out of file descriptors: requests get 503 until connections close; raise the limit (ulimit -n, LimitNOFILE): an idle stream costs two",
				zap.Int64("refused", n), zap.Error(err))
		}
	}
	return NoDescriptorsError()
}

// WatchDescriptors makes running out of descriptors loud before and
// while it happens, until ctx ends: Caddy cannot answer a client it cannot
// accept (Go's server retries the accept and logs the failure at Debug).
// It samples the open descriptors against the soft limit every
// descriptorWatchEvery, publishes both (caddy_mlc_open_files,
// caddy_mlc_open_files_limit), and logs a Warn when they cross
// descriptorAlarm of the limit, again only once they fell below
// descriptorRearm. One watch runs per process (the adapter holds it).
const (
	descriptorWatchEvery = 2 * time.Second
	descriptorAlarm      = 0.9
	descriptorRearm      = 0.8
)

func WatchDescriptors(ctx context.Context, log *zap.Logger) {
	var alarm descriptorAlarmState
	m := sharedMetrics()
	t := time.NewTicker(descriptorWatchEvery)
	defer t.Stop()
	for {
		open, limit, err := OpenDescriptors()
		switch {
		case errors.Is(err, os.ErrNotExist):
			return // no /proc: nothing to watch here
		case OutOfDescriptors(err):
			open = limit // the count itself needs a descriptor
		case err != nil:
			log.Debug("counting open descriptors", zap.Error(err))
		}
		if err == nil || OutOfDescriptors(err) {
			m.openFiles.Set(float64(open))
			m.openFilesLimit.Set(float64(limit))
			if alarm.observe(open, limit) {
				log.Warn("open file descriptors near the limit: new clients may not be accepted, and engines not reached; raise the limit (ulimit -n, LimitNOFILE)",
					zap.Int("open", open), zap.Int("limit", limit))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// descriptorAlarmState says when to warn: crossing the alarm level, once
// until the count falls back below the rearm level.
type descriptorAlarmState struct{ raised bool }

func (a *descriptorAlarmState) observe(open, limit int) (warn bool) {
	if limit <= 0 {
		return false
	}
	switch frac := float64(open) / float64(limit); {
	case !a.raised && frac >= descriptorAlarm:
		a.raised = true
		return true
	case a.raised && frac < descriptorRearm:
		a.raised = false
	}
	return false
}
