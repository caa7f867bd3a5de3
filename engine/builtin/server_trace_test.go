package builtin

import (
	"bytes"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A request that carries a W3C traceparent gets a request line with it in
// the engine's log; one without gets none.
func TestTracedRequestLine(t *testing.T) {
	var out bytes.Buffer
	s := &server{e: &Engine{logger: log.New(&out, "mlc-engine: ", 0)}}
	h := s.handler()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := httptest.NewRequest(http.MethodGet, "/nope", nil)
	req.Header.Set("traceparent", tp)
	h.ServeHTTP(httptest.NewRecorder(), req)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/nope", nil))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "GET /nope 404") || !strings.HasSuffix(lines[0], "traceparent="+tp) {
		t.Fatalf("engine log: %q", out.String())
	}
}
