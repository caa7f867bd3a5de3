package router

import (
	"net/http"
	"sync/atomic"
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
type descriptorLog struct {
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
func noDescriptors(log *zap.Logger, descriptorLog *descriptorLog, err error) *protocol.Error {
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
