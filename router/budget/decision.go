package budget

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// CodeRateLimitExceeded is OpenAI's code of a request over a budget (429).
const CodeRateLimitExceeded = "rate_limit_exceeded"

// What a refused request exceeded: OpenAI's error types of a 429.
const (
	ExceededTokens   = "tokens"
	ExceededRequests = "requests"
)

// Status is one budget of a tenant as a decision left it.
type Status struct {
	// Limit is the budget per minute.
	Limit int64
	// Remaining is what is left now, whole.
	Remaining int64
	// Used is what the bucket holds spent, rounded up.
	Used int64
	// Reset is the time until the budget is whole again.
	Reset time.Duration
}

// Decision is a budget's answer to a request.
type Decision struct {
	// Allowed is false when the request is over a budget.
	Allowed bool
	// Tokens and Requests are the tenant's budgets after the decision;
	// nil for a budget the tenant does not have.
	Tokens, Requests *Status
	// Requested is the tokens the request asked for.
	Requested int64
	// Exceeded names the budget a refused request is over: tokens or
	// requests (the longer wait, when both).
	Exceeded string
	// RetryAfter is when a refused request would fit.
	RetryAfter time.Duration
}

// SetHeaders sets OpenAI's rate limit headers of the tenant's budgets.
// They go on every answer, allowed or not.
func (d *Decision) SetHeaders(h http.Header) {
	set := func(kind string, s *Status) {
		if s == nil {
			return
		}
		h.Set("X-Ratelimit-Limit-"+kind, strconv.FormatInt(s.Limit, 10))
		h.Set("X-Ratelimit-Remaining-"+kind, strconv.FormatInt(s.Remaining, 10))
		h.Set("X-Ratelimit-Reset-"+kind, FormatReset(s.Reset))
	}
	set("Requests", d.Requests)
	set("Tokens", d.Tokens)
}

// Error returns the 429 answer of a refused request in OpenAI's shape,
// with Retry-After; nil when the request is allowed.
func (d *Decision) Error() *protocol.Error {
	if d.Allowed {
		return nil
	}
	s, what, requested := d.Tokens, "tokens per min (TPM)", d.Requested
	if d.Exceeded == ExceededRequests {
		s, what, requested = d.Requests, "requests per min (RPM)", 1
	}
	e := protocol.Errorf(http.StatusTooManyRequests, d.Exceeded,
		"Rate limit reached on %s: Limit %d, Used %d, Requested %d. Please try again in %s.",
		what, s.Limit, s.Used, requested, FormatReset(d.RetryAfter)).WithCode(CodeRateLimitExceeded)
	e.RetryAfter = max(d.RetryAfter, time.Second)
	return e
}

// FormatReset writes a duration as OpenAI's rate limit headers do: Go's
// notation rounded up to the millisecond, 6m0s, 1.5s, 20ms, 0s.
func FormatReset(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond).String()
}

// String describes the decision for logs.
func (d *Decision) String() string {
	if d.Allowed {
		return "allowed"
	}
	return fmt.Sprintf("over the %s budget, retry in %s", d.Exceeded, FormatReset(d.RetryAfter))
}
