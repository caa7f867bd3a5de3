package router

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// codeRequestTimeout is the code of the answer to a request that ran
// past request_timeout.
const codeRequestTimeout = "request_timeout"

// withRequestTimeout bounds hreq's whole time, queue, attempts and
// backoffs included, by RequestTimeout (none when 0): its context ends
// then with the 504 the client is told, in its API's shape (the sinks
// write it: an OpenAI error, an Anthropic error, response.failed).
func (c *Config) withRequestTimeout(hreq *http.Request) (*http.Request, context.CancelFunc) {
	if c.RequestTimeout <= 0 {
		return hreq, func() {}
	}
	cause := protocol.Errorf(http.StatusGatewayTimeout, protocol.ErrTypeServer,
		"the request did not complete within this server's request_timeout of %v", c.RequestTimeout).WithCode(codeRequestTimeout)
	ctx, cancel := context.WithTimeoutCause(hreq.Context(), c.RequestTimeout, cause)
	return hreq.WithContext(ctx), cancel
}

// timedOut is err, or the request's timeout when that is what ended it.
func timedOut(ctx context.Context, err error) error {
	var apiErr *protocol.Error
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &apiErr) && apiErr.Code != nil && *apiErr.Code == codeRequestTimeout {
		return apiErr
	}
	return err
}

// lift lifts the server's write deadline (Caddy's write_timeout) off the
// answer: the stall writer bounds each write instead, and nothing a
// request waits for while it is worked on (a queue, a long prefill) cuts
// it.
func (s *stallWriter) lift() { _ = s.rc.SetWriteDeadline(time.Time{}) }
