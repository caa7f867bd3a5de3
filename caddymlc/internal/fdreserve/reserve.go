// Package fdreserve makes running out of file descriptors loud and fast
// for the clients a server cannot accept. Without it such a client waits
// in the kernel's accept queue, unanswered, while Go's server retries the
// accept with a backoff of up to a second.
//
// Each wrapped listener adds a spare descriptor (an open /dev/null) to a
// Reserve the process's wrapped listeners share. When an accept fails
// with EMFILE or ENFILE, the listener lets a spare go and accepts one
// client with it. A client is served when the reserve can be made whole
// again after it was accepted (the process has a descriptor free beyond
// the reserve); otherwise it is answered the user's 503 (Refusal.Answer:
// an error with Retry-After, sent with Connection: close) over HTTP/1.1
// or, after a TLS handshake that negotiated it, HTTP/2, and closed, and
// the spare is taken back. Each refused client is counted
// (Refusal.Count); an Error line says why at most once a second
// per listener, and a Warn line says when clients are accepted again.
// The caddymlc adapter wires it as the mlc_descriptor_reserve listener
// wrapper.
package fdreserve

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/descriptors"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

const (
	// DefaultTimeout bounds the answer to one refused client.
	DefaultTimeout = time.Second
	// refusalLogEvery rate-limits the Error line about refused clients.
	refusalLogEvery = time.Second
	// spareBack is how long an accept waits for a client without its
	// spare.
	spareBack = 5 * time.Millisecond
	// maxRefusedHead bounds what is read of a refused request's head.
	maxRefusedHead = 64 << 10
)

// Reserve is the spare descriptors of a process's wrapped listeners (one
// each, an open /dev/null), shared, so that the descriptor one listener
// lets go to accept a client never passes for a free one in another.
// The process has one (NewReserve); its listeners wrap through it.
type Reserve struct {
	mu   sync.Mutex
	open func() (io.Closer, error)
	held []io.Closer
	want int
}

// add grows the reserve by one spare; it reports whether it is full.
func (r *Reserve) add() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want++
	return r.refillLocked()
}

// remove shrinks the reserve by one spare.
func (r *Reserve) remove() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want--
	for len(r.held) > max(r.want, 0) {
		r.borrowLocked()
	}
}

// borrow lets one spare go; it reports whether there was one.
func (r *Reserve) borrow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.borrowLocked()
}

func (r *Reserve) borrowLocked() bool {
	n := len(r.held)
	if n == 0 {
		return false
	}
	_ = r.held[n-1].Close()
	r.held = r.held[:n-1]
	return true
}

// refill takes back every spare let go; it reports whether it could: the
// process has descriptors free beyond its reserve.
func (r *Reserve) refill() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refillLocked()
}

func (r *Reserve) refillLocked() bool {
	for len(r.held) < r.want {
		f, err := r.open()
		if err != nil {
			return false
		}
		r.held = append(r.held, f)
	}
	return true
}

// NewReserve is an empty reserve of spares opened on /dev/null.
func NewReserve() *Reserve {
	return &Reserve{open: func() (io.Closer, error) { return os.Open(os.DevNull) }}
}

// Refusal is how a wrapped listener answers a client it cannot serve, as
// its user says: the answer, the count, the bound and the log.
type Refusal struct {
	// Answer is the 503 a refused client gets (its status, body and
	// Retry-After are sent).
	Answer func() *protocol.Error
	// Count counts one refused client; nil: none.
	Count func()
	// Timeout bounds the answer to one refused client (DefaultTimeout
	// when not positive).
	Timeout time.Duration
	Log     *zap.Logger
}

// Wrap wraps ln, adding its spare to the reserve: a client ln cannot
// accept for want of a descriptor is answered as ref says (see the
// package doc), and closed.
func (r *Reserve) Wrap(ln net.Listener, ref Refusal) net.Listener {
	if ref.Log == nil {
		ref.Log = zap.NewNop()
	}
	if ref.Count == nil {
		ref.Count = func() {}
	}
	if ref.Timeout <= 0 {
		ref.Timeout = DefaultTimeout
	}
	l := &listener{Listener: ln, spares: r, timeout: ref.Timeout, ref: ref,
		log: ref.Log.With(zap.String("address", ln.Addr().String()))}
	if !r.add() {
		l.log.Warn("no spare file descriptor at start: clients that cannot be accepted wait unanswered until one is free")
	}
	return l
}

// listener is a listener whose clients the process cannot accept are
// answered with the reserve.
type listener struct {
	net.Listener
	spares  *Reserve
	timeout time.Duration
	ref     Refusal
	log     *zap.Logger
	closed  sync.Once

	mu      sync.Mutex
	refused int64 // clients refused since the last log line
	episode int64 // clients refused since a client was last accepted
	logged  time.Time
}

// Accept returns the next client the process can serve, answering on the way
// those it cannot. A client is served when the reserve is whole after it
// was accepted: the process has a descriptor free beyond it.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		cause := err
		if err != nil {
			if !descriptors.Exhausted(err) {
				return nil, err
			}
			if !l.spares.borrow() {
				// No spare left (what the last refusals freed went
				// elsewhere in the process): Go's server backs off and
				// retries.
				l.spares.refill()
				return nil, err
			}
			// A client already waiting is accepted at once with the
			// spare's descriptor. If none is, the spare is taken back
			// meanwhile, so that an accept waiting for its next client
			// leaves no descriptor free: that client's arrival fails the
			// accept, and the next round takes it.
			t := time.AfterFunc(spareBack, func() { l.spares.refill() })
			c, err = l.Listener.Accept()
			t.Stop()
			if err != nil {
				if descriptors.Exhausted(err) {
					continue
				}
				l.spares.refill()
				return nil, err
			}
		}
		// A client can also take the spare another listener let go for
		// a moment: it is refused too.
		if l.spares.refill() {
			l.accepted()
			return c, nil
		}
		l.refuse(c, cause)
		l.spares.refill()
	}
}

// Close gives its spare back and closes the listener.
func (l *listener) Close() error {
	l.closed.Do(l.spares.remove)
	return l.Listener.Close()
}

// accepted notes a client accepted, and says so once after refusals.
func (l *listener) accepted() {
	l.mu.Lock()
	n := l.episode
	l.episode = 0
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn("file descriptors available again: accepting clients", zap.Int64("refused", n))
	}
}

// refuse answers c, which the process has no descriptor to serve, and closes it.
// cause is the accept's error (EMFILE or ENFILE), if it had one.
func (l *listener) refuse(c net.Conn, cause error) {
	// The deadline bounds the reads and writes below; the timer also
	// bounds an HTTP/2 exchange, whose server sets deadlines of its own.
	_ = c.SetDeadline(time.Now().Add(l.timeout))
	stop := time.AfterFunc(l.timeout, func() { _ = c.Close() })
	how, err := l.answer(c)
	stop.Stop()
	_ = c.Close()
	l.ref.Count()

	l.mu.Lock()
	l.refused++
	l.episode++
	n, now := l.refused, time.Now()
	logNow := now.Sub(l.logged) >= refusalLogEvery
	if logNow {
		l.refused, l.logged = 0, now
	}
	l.mu.Unlock()
	fields := []zap.Field{zap.String("last", how)}
	if cause != nil {
		fields = append(fields, zap.Error(cause))
	}
	if err != nil {
		fields = append(fields, zap.NamedError("answer", err))
	}
	if logNow {
		l.log.Error("out of file descriptors: clients that cannot be accepted get 503 until connections close; raise the limit (ulimit -n, LimitNOFILE): an idle stream costs two",
			append(fields, zap.Int64("refused", n))...)
	} else {
		l.log.Debug("client refused: out of file descriptors", fields...)
	}
}

// answer sends c its 503 as far as it can, and says how it went.
func (l *listener) answer(c net.Conn) (how string, err error) {
	if tc, ok := c.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			return "closed: TLS handshake failed", err
		}
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return "503 over HTTP/2", l.answerH2(tc)
		}
		return refuseHTTP1(tc, bufio.NewReader(io.LimitReader(tc, maxRefusedHead)), l.ref.Answer())
	}
	br := bufio.NewReader(io.LimitReader(c, maxRefusedHead))
	first, err := br.Peek(1)
	if err != nil {
		return "closed: no request", err
	}
	if first[0] == 0x16 { // a TLS handshake record
		return "closed: a TLS client, and the wrapper sits before tls (put it after to answer it)", nil
	}
	return refuseHTTP1(c, br, l.ref.Answer())
}

// refuseHTTP1 reads a request's head from br and answers it e.
func refuseHTTP1(c net.Conn, br *bufio.Reader, e *protocol.Error) (string, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return "closed: not an HTTP request", err
	}
	if req.ProtoMajor != 1 {
		return "closed: HTTP/2 without TLS", nil
	}
	body := append(e.Body(), '\n')
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nRetry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
		e.Status, http.StatusText(e.Status), int((e.RetryAfter+time.Second-1)/time.Second), len(body))
	out := []byte(head)
	if req.Method != http.MethodHead {
		out = append(out, body...)
	}
	if _, err := c.Write(out); err != nil {
		return "closed: the answer could not be written", err
	}
	// A body the client is still sending would turn the close into a
	// reset, which can destroy the answer before the client reads it:
	// read it away until the client closes (as Connection: close asks) or
	// the deadline.
	if req.ContentLength != 0 && req.Header.Get("Expect") == "" {
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, c)
	}
	return "503", nil
}

// answerH2 answers the 503 to the requests of an HTTP/2 connection
// through Go's server (Connection: close makes it send GOAWAY), and
// returns when the connection is closed.
func (l *listener) answerH2(tc *tls.Conn) error {
	errLog, _ := zap.NewStdLogAt(l.log, zap.DebugLevel)
	one := &oneConnListener{conn: tc, done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Connection", "close")
			l.ref.Answer().Write(w)
		}),
		ReadTimeout: l.timeout, WriteTimeout: l.timeout, IdleTimeout: l.timeout,
		ErrorLog: errLog,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				one.once.Do(func() { close(one.done) })
			}
		},
	}
	if err := srv.Serve(one); !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// oneConnListener hands one connection to a server, then waits until the
// server is done with it: Serve returns then.
type oneConnListener struct {
	conn net.Conn
	done chan struct{}
	once sync.Once
	took bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.took {
		l.took = true
		return l.conn, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
