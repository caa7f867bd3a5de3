package router

import (
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Defaults of the bounds on a client's own pace.
const (
	// DefaultBodyTimeout bounds how long a request body may take to
	// arrive: a 4 MiB body (max_body_size's default) in 20 s is 1.7
	// Mbit/s, slower than any client that means to be served, and a body
	// that never ends no longer holds its connection and handler.
	DefaultBodyTimeout = 20 * time.Second
	// DefaultClientTimeout bounds how long a client may go without
	// accepting a byte of its answer. A client's network may stall for
	// seconds (a mobile hand-over); half a minute is past any of those,
	// while the engine's KV, its batch slot and the reservation it holds
	// for a client that stopped reading cost every other client.
	DefaultClientTimeout = 30 * time.Second
)

// Reasons the router lets a client go, as counted in
// caddy_mlc_clients_dropped_total.
const (
	dropSlowBody = "slow_body" // the body did not arrive within body_timeout
	dropStalled  = "stalled"   // the client accepted no byte for client_timeout
)

// bodyTimedOut is the answer to a request whose body did not arrive in
// time; the connection is closed after it, as its body is still coming.
func (r *Router) bodyTimedOut(w http.ResponseWriter, e *protocol.Error) {
	r.metrics.dropped.WithLabelValues(dropSlowBody).Inc()
	w.Header().Set("Connection", "close")
	e.Write(w)
}

// stallWriter lets a client go that stops reading: each write (and
// flush) of the answer must be accepted within the timeout, else it fails
// as a client that left does, which cancels the engines' work for it and
// frees its KV. A client's pace within the timeout is its own affair.
type stallWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	deadline time.Time
	stalled  bool // a write ran into the deadline
}

func newStallWriter(w http.ResponseWriter, timeout time.Duration) *stallWriter {
	return &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
}

// arm sets the deadline of the next write.
func (s *stallWriter) arm() {
	s.deadline = time.Now().Add(s.timeout)
	_ = s.rc.SetWriteDeadline(s.deadline)
}

// check records a write that failed at its deadline.
func (s *stallWriter) check(err error) error {
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(s.deadline)) {
		s.stalled = true
	}
	return err
}

func (s *stallWriter) Write(b []byte) (int, error) {
	s.arm()
	n, err := s.ResponseWriter.Write(b)
	return n, s.check(err)
}

func (s *stallWriter) Flush() {
	s.arm()
	_ = s.check(s.rc.Flush())
}

// Unwrap lets http.ResponseController reach the connection.
func (s *stallWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// end lifts the deadline, which would otherwise stay on a kept-alive
// connection for its next request.
func (s *stallWriter) end() { _ = s.rc.SetWriteDeadline(time.Time{}) }
