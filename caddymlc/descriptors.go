package caddymlc

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// dropNoDescriptors counts requests refused because the process could
// not open a connection to an engine (caddy_mlc_clients_dropped_total).
const dropNoDescriptors = "no_descriptors"

// outOfDescriptors reports a call that failed because the process (EMFILE)
// or the system (ENFILE) is out of file descriptors.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
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
func noDescriptors(err error) *protocol.Error {
	metrics := sharedMetrics()
	metrics.dropped.WithLabelValues(dropNoDescriptors).Inc()
	n := descriptorLog.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := descriptorLog.last.Load(); now-last >= int64(descriptorLogEvery) && descriptorLog.last.CompareAndSwap(last, now) {
		descriptorLog.dropped.Add(-n)
		if l := current.Load(); l != nil {
			l.logger.Error("out of file descriptors: requests get 503 until connections close; raise the limit (ulimit -n, LimitNOFILE): an idle stream costs two",
				zap.Int64("refused", n), zap.Error(err))
		}
	}
	e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
		"the server is out of file descriptors; retry later").WithCode("no_descriptors")
	e.RetryAfter = retryAfter
	return e
}

// The descriptor watch makes running out of descriptors loud before and
// while it happens: Caddy cannot answer a client it cannot accept (Go's
// server retries the accept and logs the failure at Debug). It samples the
// open descriptors against the soft limit every descriptorWatchEvery,
// publishes both (caddy_mlc_open_files, caddy_mlc_open_files_limit), and
// logs a Warn when they cross descriptorAlarm of the limit, again only
// once they fell below descriptorRearm. One watch runs per process, held
// by the configs that run (a caddy.UsagePool entry).
const (
	descriptorWatchEvery = 2 * time.Second
	descriptorAlarm      = 0.9
	descriptorRearm      = 0.8
)

var descriptorWatches = caddy.NewUsagePool()

const descriptorWatchKey = "descriptors"

// holdDescriptorWatch starts the process's watch, or holds the running
// one; releaseDescriptorWatch lets it go (the last holder stops it).
func holdDescriptorWatch(log *zap.Logger) {
	_, _, _ = descriptorWatches.LoadOrNew(descriptorWatchKey, func() (caddy.Destructor, error) {
		ctx, cancel := context.WithCancel(context.Background())
		w := &descriptorWatch{cancel: cancel, done: make(chan struct{})}
		goroutine.Go(log, "descriptor watch", func() { w.run(ctx, log) }, nil)
		return w, nil
	})
}

func releaseDescriptorWatch() { _, _ = descriptorWatches.Delete(descriptorWatchKey) }

// descriptorWatch is the running watch.
type descriptorWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	alarm  descriptorAlarmState
}

// Destruct stops the watch.
func (w *descriptorWatch) Destruct() error {
	w.cancel()
	<-w.done
	return nil
}

func (w *descriptorWatch) run(ctx context.Context, log *zap.Logger) {
	defer close(w.done)
	m := sharedMetrics()
	t := time.NewTicker(descriptorWatchEvery)
	defer t.Stop()
	for {
		open, limit, err := openDescriptors()
		switch {
		case errors.Is(err, os.ErrNotExist):
			return // no /proc: nothing to watch here
		case outOfDescriptors(err):
			open = limit // the count itself needs a descriptor
		case err != nil:
			log.Debug("counting open descriptors", zap.Error(err))
		}
		if err == nil || outOfDescriptors(err) {
			m.openFiles.Set(float64(open))
			m.openFilesLimit.Set(float64(limit))
			if w.alarm.observe(open, limit) {
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
