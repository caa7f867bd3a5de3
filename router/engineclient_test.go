package router

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// A stream read to its [DONE] keeps its connection: the next call to the
// engine reuses it. The engine ends its body only after the router has
// seen [DONE] (as a real engine does, in a later write than the event's),
// so a router that closed the body at [DONE] would lose the connection on
// every call.
func TestStreamsKeepTheirConnection(t *testing.T) {
	var conns atomic.Int64
	sawDone := make(chan struct{}, 1)
	quit := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select { // the body ends once the router has read [DONE]
		case <-sawDone:
		case <-r.Context().Done():
		case <-quit: // the test ended early
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) }) // before srv.Close, which waits for the handlers

	lf := externalFleet(t, 1)
	u := &Upstream{pool: lf.Pool, index: 0, addr: srv.Listener.Addr().String(), url: srv.URL}
	c := newEngineClient(5*time.Second, zap.NewNop(), new(descriptorLog))
	t.Cleanup(c.close)
	const calls = 5
	for i := range calls {
		s, err := c.stream(context.Background(), &proc{Upstream: u}, "/v1/completions", map[string]any{"prompt": []int{1}, "stream": true})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		for {
			_, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		sawDone <- struct{}{}
		s.close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d calls in turn opened %d connections, want 1", calls, n)
	}
}
