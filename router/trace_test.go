package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/completiontest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// preemptingProxy fronts an engine and ends its first start_generate
// stream with finish_reason "preempt" after a few pieces of text, as an
// engine short of KV memory does; it records the traceparent of every
// call it passes on.
type preemptingProxy struct {
	engine    string
	preempted atomic.Bool
	mu        sync.Mutex
	parents   map[string][]string // path -> traceparents
}

func (p *preemptingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.parents[r.URL.Path] = append(p.parents[r.URL.Path], r.Header.Get("traceparent"))
	p.mu.Unlock()
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.engine+r.URL.Path, r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if r.URL.Path != protocol.PathStartGenerate || !p.preempted.CompareAndSwap(false, true) {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	completiontest.PreemptStream(w, resp.Body, 3, func() bool { return true })
}

// A disaggregated request that an engine preempted and the router resumed
// shows its whole story in one trace: under the request's span, the
// admission and one span per attempt (the second saying it resumes a
// preemption), and under each attempt its calls by name (microserving's
// for the first, the prefill engine's whole completion for the resumed
// one), the generating call's span with its first token, tokens and
// finish reason; the engines get the traceparent of the call's span. The
// text is exact.
func TestTraceOfAPreemptedRequest(t *testing.T) {
	s := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	body := greedy("the lighthouse keeper counted the ships", 24)
	want := s.complete(s.engines[1], body)

	proxy := &preemptingProxy{engine: s.engines[1], parents: map[string][]string{}}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	dec := s.fleet.upstreams[s.r.roles["decode"][0]]
	dec.url = front.URL

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	// The client has the whole stream before the handler returns: the
	// spans are read once the root span ended.
	handled := make(chan struct{}, 1)
	traced := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tp.Tracer("test").Start(r.Context(), "request")
		defer func() {
			span.End()
			handled <- struct{}{}
		}()
		NewModels([]*Router{s.r}, 0).ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(traced.Close)
	if got, done := s.streamAt(traced.URL, body); got != want || !done {
		t.Fatalf("resumed text %q (done %v), want %q", got, done, want)
	}
	select {
	case <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the request's handler did not return")
	}
	if !proxy.preempted.Load() {
		t.Fatal("the proxy preempted nothing: the test did not test a resume")
	}

	spans := rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var root sdktrace.ReadOnlySpan
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
		if sp.Name() == "request" {
			root = sp
		}
	}
	children := func(parent sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, sp := range spans {
			if sp.Parent().SpanID() == parent.SpanContext().SpanID() {
				out = append(out, sp)
			}
		}
		slices.SortFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		return out
	}
	names := func(ss []sdktrace.ReadOnlySpan) []string {
		var out []string
		for _, sp := range ss {
			out = append(out, sp.Name())
		}
		return out
	}
	attr := func(sp sdktrace.ReadOnlySpan, key string) attribute.Value {
		for _, kv := range sp.Attributes() {
			if string(kv.Key) == key {
				return kv.Value
			}
		}
		return attribute.Value{}
	}
	top := children(root)
	if got := names(top); !slices.Equal(got, []string{"mlc.admission", "mlc.attempt", "mlc.attempt"}) {
		t.Fatalf("the request's children: %q", got)
	}
	first, second := top[1], top[2]
	if attr(first, "mlc.outcome").AsString() != "preempt" || attr(second, "mlc.retry_cause").AsString() != "preempt" ||
		attr(second, "mlc.attempt").AsInt64() != 2 || attr(second, "mlc.outcome").AsString() != "finished" {
		t.Fatalf("attempts: %v / %v", first.Attributes(), second.Attributes())
	}
	// The first attempt is disaggregated; the decode engine preempted
	// it, and with no other decode engine the resumed attempt is served
	// whole by the prefill engine, which has room (decode_short).
	pre := s.fleet.upstreams[s.r.roles["prefill"][0]]
	for i, attempt := range []sdktrace.ReadOnlySpan{first, second} {
		calls := children(attempt)
		got := names(calls)
		switch i {
		case 0:
			if len(got) < 2 || got[0] != "prep_recv" || got[len(got)-1] != "start_generate" || !slices.Contains(got, "remote_send") {
				t.Fatalf("the first attempt's calls: %q", got)
			}
		case 1:
			if !slices.Equal(got, []string{"v1/completions"}) {
				t.Fatalf("the resumed attempt's calls: %q", got)
			}
		}
		gen := calls[len(calls)-1]
		wantFinish := []string{protocol.FinishPreempt, protocol.FinishLength}[i]
		if attr(gen, "mlc.finish_reason").AsString() != wantFinish || attr(gen, "mlc.tokens").AsInt64() == 0 ||
			!slices.ContainsFunc(gen.Events(), func(e sdktrace.Event) bool { return e.Name == "first token" }) {
			t.Fatalf("attempt %d's generating call: %v %v", i+1, gen.Attributes(), gen.Events())
		}
		if want := []string{dec.addr, pre.addr}[i]; attr(gen, "mlc.engine").AsString() != want {
			t.Fatalf("attempt %d generated on %v, want %s", i+1, attr(gen, "mlc.engine"), want)
		}
	}
	// The engine got each call's own span as its parent.
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	for _, tpHeader := range proxy.parents[protocol.PathStartGenerate] {
		parts := strings.Split(tpHeader, "-")
		if len(parts) != 4 || parts[1] != root.SpanContext().TraceID().String() {
			t.Fatalf("start_generate's traceparent %q is not of the request's trace %s", tpHeader, root.SpanContext().TraceID())
		}
		sp, ok := byID[mustSpanID(t, parts[2])]
		if !ok || sp.Name() != "start_generate" {
			t.Fatalf("start_generate's traceparent names span %s, not a start_generate span", parts[2])
		}
	}
}

func mustSpanID(t *testing.T, s string) trace.SpanID {
	id, err := trace.SpanIDFromHex(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
