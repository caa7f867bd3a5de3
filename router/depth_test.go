package router

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// frontDoor stands for the adapter's handler, whose ServeHTTP is where
// Caddy hands a request over.
type frontDoor struct{ m *Models }

func (f frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.m.ServeHTTP(w, r) }

// depthTransport records, for each engine call, the calls from
// frontDoor.ServeHTTP down to http.Client.Do.
type depthTransport struct {
	next  http.RoundTripper
	mu    sync.Mutex
	calls map[string][]string // by the engine's path, the deepest stack seen
}

func (d *depthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	var stack []string
	do := -1
	for {
		f, more := frames.Next()
		if f.Function == "net/http.(*Client).Do" {
			do = len(stack)
		}
		if do >= 0 {
			stack = append(stack, f.Function)
			if strings.HasSuffix(f.Function, "frontDoor.ServeHTTP") {
				break
			}
		}
		if !more {
			stack = nil
			break
		}
	}
	if stack != nil {
		d.mu.Lock()
		if len(stack) > len(d.calls[req.URL.Path]) {
			d.calls[req.URL.Path] = stack
		}
		d.mu.Unlock()
	}
	return d.next.RoundTrip(req)
}

// From the adapter's ServeHTTP to the engine client's http.Client.Do, a
// request is at most maxDepth calls deep, for every call of a streamed
// and a whole completion, disaggregated and whole.
func TestCallDepthToEngine(t *testing.T) {
	const maxDepth = 10
	for _, mode := range []string{ModeDisagg, ModeWhole} {
		t.Run(mode, func(t *testing.T) {
			c := startCore(t, 2, Config{Mode: mode, MaxPrefillQueue: -1}, nil)
			d := &depthTransport{next: c.r.client.http.Transport, calls: map[string][]string{}}
			if d.next == nil {
				d.next = http.DefaultTransport
			}
			c.r.client.http.Transport = d
			srv := httptest.NewServer(frontDoor{NewModels([]*Router{c.r}, 0)})
			t.Cleanup(srv.Close)
			c.complete(srv.URL, greedy("the cat sat on the mat and looked", 4))
			body := greedy("the cat sat on the mat and looked", 4)
			body["stream"] = true
			if _, done := c.streamAt(srv.URL, body); !done {
				t.Fatal("the stream did not end")
			}
			if len(d.calls) == 0 {
				t.Fatal("no engine call seen")
			}
			for path, stack := range d.calls {
				t.Logf("%s: %d calls deep", path, len(stack)-1)
				if len(stack)-1 > maxDepth {
					t.Errorf("%s is %d calls deep, want at most %d:\n%s", path, len(stack)-1, maxDepth, strings.Join(stack, "\n"))
				}
			}
		})
	}
}
