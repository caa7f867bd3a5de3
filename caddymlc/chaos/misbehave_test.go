package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// misbehavior is what a broken engine does with a streamed completion:
// it answers 200, then sends something that is not a generation.
type misbehavior struct {
	name string
	// serve writes the broken answer; it returns when the request ends.
	serve func(w http.ResponseWriter, r *http.Request)
	// breaker: the engine's breaker must open (an answer that is wrong,
	// not merely slow).
	breaker bool
}

var misbehaviors = []misbehavior{
	{name: "chatty", serve: func(w http.ResponseWriter, r *http.Request) {
		// Keep-alive events without choices, 1,000 a second, for
		// longer than any request should wait: bytes, no progress.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		end := time.After(20 * time.Second)
		for {
			select {
			case <-r.Context().Done():
				return
			case <-end:
				return
			case <-tick.C:
				if _, err := io.WriteString(w, `data: {"id":"x","object":"text_completion","created":1,"model":"tiny","choices":[]}`+"\n\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}},
	{name: "malformed", breaker: true, serve: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\n\n")
	}},
	{name: "truncated", breaker: true, serve: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: [DONE]\n\n") // no token, no finish
	}},
	{name: "html", breaker: true, serve: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>maintenance</html>")
	}},
}

// Misbehaving engines: one of two engines answers streamed completions
// with 200 and then chatter, a malformed event, a stream that ends with
// no finish, or HTML. Every request is resumed on the good engine with
// the exact text, none waits longer than the engine timeout and 2 s, and
// the breaker of an engine whose answers are wrong (not just slow) opens.
func TestMisbehavingEngines(t *testing.T) {
	for _, mb := range misbehaviors {
		t.Run(mb.name, func(t *testing.T) {
			good, bad := freeAddr(t), freeAddr(t)
			startEngine(t, good)
			startEngine(t, bad)
			target, _ := url.Parse("http://" + bad)
			rp := httputil.NewSingleHostReverseProxy(target)
			rp.FlushInterval = -1
			var hits sync.WaitGroup
			var served atomic.Int64 // bad answers given
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				body, _ := io.ReadAll(req.Body)
				req.Body = io.NopCloser(bytes.NewReader(body))
				// Load polls and metrics pass; generations misbehave.
				if req.URL.Path == "/v1/completions" && bytes.Contains(body, []byte(`"stream":true`)) && !bytes.Contains(body, []byte("special_request")) {
					hits.Add(1)
					defer hits.Done()
					served.Add(1)
					mb.serve(w, req)
					return
				}
				rp.ServeHTTP(w, req)
			}))
			t.Cleanup(func() { proxy.CloseClientConnections(); proxy.Close() })
			const engineTimeout = 2 * time.Second
			r := newRig(t, rigConfig{
				external: []string{
					good + " external",
					strings.TrimPrefix(proxy.URL, "http://") + " external",
				},
				routerOpts: fmt.Sprintf("\t\tmode whole\n\t\tpolicy round_robin\n\t\tengine_timeout %v\n", engineTimeout),
			})
			jobs := longJobs(pick(6, 24), 16)
			refs := r.references(jobs)
			var ta tally
			var wg sync.WaitGroup
			for i, j := range jobs {
				wg.Go(func() {
					res := r.do(context.Background(), j, r.base)
					if res.took > engineTimeout+2*time.Second {
						res.err = fmt.Sprintf("took %v", res.took.Round(time.Millisecond))
					}
					ta.add(res, refs[i])
				})
			}
			wg.Wait()
			if mb.breaker {
				// The breaker opens after three bad answers in a row: how
				// many of the jobs round_robin gave the bad engine depends
				// on how their retries interleaved. More requests, one at
				// a time, alternate until it has given three (or its
				// breaker keeps them away).
				for i := 0; served.Load() < 3 && i < 8; i++ {
					j := jobs[i%len(jobs)]
					res := r.do(context.Background(), j, r.base)
					ta.add(res, refs[i%len(jobs)])
				}
				if st := r.status().Engines[1]; st.Breaker == "closed" {
					t.Errorf("the %s engine's breaker is closed after %d bad answers", mb.name, served.Load())
				}
			}
			proxy.CloseClientConnections()
			hits.Wait()
			r.finish(&ta, "misbehave-"+mb.name, engineTimeout+time.Second)
		})
	}
}
