package caddymlc

import (
	"errors"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

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
