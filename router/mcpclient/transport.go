package mcpclient

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// transport is a session's way to its server: it adds the session's
// headers (the SDK's own win), the W3C trace context of a traced
// request, remembers the last error status the server answered (for the
// call's error), and bounds each answer's body.
type transport struct {
	base   http.RoundTripper
	header http.Header
	limit  int64
	status atomic.Int32
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.header {
		if _, set := req.Header[k]; !set {
			req.Header[k] = v
		}
	}
	if trace.SpanContextFromContext(req.Context()).IsValid() {
		propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= http.StatusMultipleChoices {
		t.status.Store(int32(resp.StatusCode))
	}
	resp.Body = &boundedBody{r: resp.Body, left: t.limit}
	return resp, nil
}

// boundedBody fails a body past its bound.
type boundedBody struct {
	r    io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // a byte past the bound, to tell a body of exactly the bound from a longer one
	}
	n, err := b.r.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return n, errors.New("the MCP server's answer is over the router's bound")
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.r.Close() }
