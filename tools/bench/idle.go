package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// Idle streams: what each open stream that carries nothing costs a Caddy
// in memory. A stub engine (see stubEngine) sends one chunk and holds
// every stream; the bench opens n streams through a fresh Caddy and reads
// its resident set and Go heap before and with them open, each after a
// garbage collection.

const (
	idleOpeners  = 64               // streams being opened at once
	idleOpenTime = 3 * time.Minute  // for all n to be open
	idleLife     = 10 * time.Minute // the longest a stream may live
	fdSlack      = 256              // descriptors besides the streams'
)

// idleResult is one measurement: a party, a number of streams, the
// client's protocol.
type idleResult struct {
	label, proto string
	streams      int
	before, with caddySample
	goroutines   [2]int // in Caddy, before and with the streams
	opened       int
	errors       int
	firstErr     error
	skipped      string // why it did not run, when it did not
}

// fdsNeeded is how many descriptors the Caddy and the bench each need for
// n streams: over HTTP/1.1, one for the client's connection and one for
// the engine's (the bench holds the client's and the stub's); over h2c the
// client's streams share connections (a few hundred each; n/100 is an
// upper bound).
func fdsNeeded(proto string, n int) int {
	if proto == "h2c" {
		return n + n/100 + fdSlack
	}
	return 2*n + fdSlack
}

// measureIdle runs every count and protocol through mlc_router and, for
// comparison, reverse_proxy.
func (b *bench) measureIdle(ctx context.Context, cfg *config, fileLimit uint64) ([]idleResult, error) {
	var out []idleResult
	for _, n := range cfg.idle {
		for _, proto := range cfg.idleProtos {
			for _, key := range []string{keyRouter, keyProxy} {
				res := idleResult{label: key, proto: proto, streams: n}
				if need := fdsNeeded(proto, n); uint64(need) > fileLimit {
					res.skipped = fmt.Sprintf("needs %d open files, the limit is %d", need, fileLimit)
					out = append(out, res)
					continue
				}
				if err := b.idleOnce(ctx, key, cfg.profileDir, &res); err != nil {
					return out, fmt.Errorf("idle streams, %s, %d over %s: %w", key, n, proto, err)
				}
				progressf("idle %s %d over %s: RSS %+.1f MiB, %d errors", key, n, proto,
					float64(res.with.rss-res.before.rss)/(1<<20), res.errors)
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// idleOnce measures one idleResult on a fresh stub and Caddy; with a
// profile directory, it saves Caddy's heap profile with the streams open.
func (b *bench) idleOnce(ctx context.Context, key, profileDir string, res *idleResult) error {
	stub, err := startStub()
	if err != nil {
		return err
	}
	defer stub.close()
	handler := mlcRouter([]string{stub.url[len("http://"):]}, "15m")
	if key == keyProxy {
		handler = reverseProxy([]string{stub.url[len("http://"):]})
	}
	name := fmt.Sprintf("idle-%s-%s-%d", key, res.proto, res.streams)
	caddy, err := b.startCaddy(ctx, name, handler, res.proto == "h2c")
	if err != nil {
		return err
	}
	defer caddy.stop()
	p := &party{key: key, urls: []string{caddy.base}, http: idleClient(res.proto, res.streams)}
	defer p.http.CloseIdleConnections()
	if err := p.waitServing(ctx); err != nil {
		return err
	}
	if res.before, res.goroutines[0], err = settledSample(ctx, caddy); err != nil {
		return err
	}
	streams := openIdle(ctx, p, res.streams)
	defer streams.stop()
	if err := streams.waitOpen(ctx); err != nil {
		return err
	}
	res.opened = int(streams.opened.Load())
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := stub.waitHeld(waitCtx, int64(res.opened)); err != nil {
		return fmt.Errorf("the stub holds %d streams of %d open: %w", stub.held.Load(), res.opened, err)
	}
	if res.with, res.goroutines[1], err = settledSample(ctx, caddy); err != nil {
		return err
	}
	if profileDir != "" {
		if err := saveHeapProfile(ctx, caddy, filepath.Join(profileDir, name)); err != nil {
			return err
		}
	}
	stub.release()
	streams.all.Wait()
	res.errors = int(streams.failed.Load())
	res.firstErr = streams.firstErr()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// settledSample samples the Caddy after a garbage collection, and counts
// its goroutines.
func settledSample(ctx context.Context, c *caddyProc) (caddySample, int, error) {
	if err := c.collectGarbage(ctx); err != nil {
		return caddySample{}, 0, err
	}
	s, err := c.sample(ctx)
	if err != nil {
		return caddySample{}, 0, err
	}
	n, err := c.goroutines(ctx)
	return s, n, err
}

// idleClient holds a connection per stream (h1), or lets streams share
// unencrypted HTTP/2 connections (h2c; Go opens another when one reaches
// the server's stream limit).
func idleClient(proto string, n int) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   n,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
	}
	if proto == "h2c" {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr}
}

// idleStreams are the streams of one measurement.
type idleStreams struct {
	n       int
	opened  atomic.Int64
	failed  atomic.Int64
	settled chan struct{} // poked when a stream opens or fails to
	all     sync.WaitGroup
	cancel  context.CancelFunc
	errMu   sync.Mutex
	err     error
}

// openIdle opens n streams through p, idleOpeners at a time; each reads
// its first event, then waits for the end of its stream.
func openIdle(ctx context.Context, p *party, n int) *idleStreams {
	ctx, cancel := context.WithTimeout(ctx, idleLife)
	s := &idleStreams{n: n, settled: make(chan struct{}, 1), cancel: cancel}
	sem := make(chan struct{}, idleOpeners)
	for range n {
		s.all.Go(func() {
			defer goroutine.Recover(logger, "idle stream", func(any) { s.fail(errors.New("panic")) })
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				s.fail(ctx.Err())
				return
			}
			s.fail(s.stream(ctx, p, holdBody, func() { <-sem }))
		})
	}
	return s
}

// stream runs one stream; opened is called once its first event came (or
// it failed before).
func (s *idleStreams) stream(ctx context.Context, p *party, body []byte, opened func()) error {
	once := sync.OnceFunc(opened)
	defer once()
	resp, _, err := postCompletion(ctx, p.http, p.urls[0], body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	_, err = readEvents(resp.Body, func(_ time.Time, first bool, _ time.Time, _ []byte) {
		if first {
			once()
			s.opened.Add(1)
			s.poke()
		}
	})
	return err
}

// fail records a stream's end: nil is a clean one.
func (s *idleStreams) fail(err error) {
	if err == nil {
		return
	}
	s.failed.Add(1)
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
	s.poke()
}

func (s *idleStreams) poke() {
	select {
	case s.settled <- struct{}{}:
	default:
	}
}

func (s *idleStreams) firstErr() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// waitOpen waits until every stream is open or has failed.
func (s *idleStreams) waitOpen(ctx context.Context) error {
	t := time.NewTimer(idleOpenTime)
	defer t.Stop()
	for s.opened.Load()+s.failed.Load() < int64(s.n) {
		select {
		case <-s.settled:
		case <-t.C:
			return fmt.Errorf("%d of %d streams open after %v", s.opened.Load(), s.n, idleOpenTime)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.opened.Load() == 0 {
		return fmt.Errorf("no stream opened: %w", s.firstErr())
	}
	return nil
}

// stop ends every stream still open and waits for them.
func (s *idleStreams) stop() {
	s.cancel()
	s.all.Wait()
}
