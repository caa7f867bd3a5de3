package caddymlc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// httpCall makes a request and returns the status and body of the answer.
func httpCall(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// apiError is what a test expects of an error answer; an empty code or
// param is a null one.
type apiError struct {
	status           int
	typ, code, param string
}

// checkError checks an error answer: its status, and a body that MLC's
// error model accepts with the expected type, code and param.
func checkError(t *testing.T, what string, status int, raw []byte, want apiError) {
	t.Helper()
	if status != want.status {
		t.Errorf("%s: status %d (%s), want %d", what, status, raw, want.status)
		return
	}
	if err := mlcschema.CheckErrorBody(bytes.TrimSpace(raw)); err != nil {
		t.Errorf("%s: %v\n%s", what, err, raw)
		return
	}
	var body protocol.ErrorBody
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	e := body.Error
	if e.Type != want.typ || deref(e.Code) != want.code || deref(e.Param) != want.param {
		t.Errorf("%s: type %q code %q param %q, want %q %q %q (%s)", what, e.Type, deref(e.Code), deref(e.Param), want.typ, want.code, want.param, e.Message)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

const (
	chatHi     = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`
	completeHi = `{"prompt":"hi","max_tokens":3}`
)

// Unknown paths of the API, unknown models and oversized bodies get
// OpenAI's errors; the served model is answered by name; paths outside
// the API still reach the next handler.
func TestAPIPathsModelsAndLimits(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n\t\t\tmax_body_size 1KiB\n")
	notFound := apiError{404, protocol.ErrTypeNotFound, protocol.CodeUnknownURL, ""}
	noModel := apiError{404, protocol.ErrTypeInvalidRequest, protocol.CodeModelNotFound, "model"}
	tooLarge := apiError{413, protocol.ErrTypeInvalidRequest, protocol.CodeRequestTooLarge, ""}
	big := strings.Repeat("a", 2000)
	for _, c := range []struct {
		method, path, body string
		want               apiError
	}{
		{"POST", "/v1/completion", completeHi, notFound},
		{"POST", "/v1/completions/", completeHi, notFound},
		{"POST", "/v1/embeddings", `{"input":"hi"}`, noModel}, // a model without an embedding_model
		{"GET", "/v1/", ``, notFound},
		{"GET", "/v1", ``, notFound},
		{"GET", "/v1/models/", ``, notFound},
		{"POST", "/v1/chat/completion", chatHi, notFound},
		{"POST", "/microserving/prep_recv", `{"prompt":[1],"end":-1}`, notFound},
		{"GET", "/v1/models/other", ``, noModel},
		{"GET", "/v1/models/tiny/more", ``, noModel},
		{"POST", "/v1/completions", `{"model":"other","prompt":"hi"}`, noModel},
		{"POST", "/v1/chat/completions", `{"model":"other","messages":[{"role":"user","content":"hi"}]}`, noModel},
		// The model is checked first: another model's request is not
		// judged by this one's rules.
		{"POST", "/v1/completions", `{"model":"other","prompt":"hi","n":0}`, noModel},
		{"POST", "/v1/completions", `{"prompt":"` + big + `"}`, tooLarge},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + big + `"}]}`, tooLarge},
		{"POST", "/v1/models/tiny", ``, apiError{405, protocol.ErrTypeInvalidRequest, "", ""}},
	} {
		status, raw := httpCall(t, c.method, s.base+c.path, c.body)
		checkError(t, c.method+" "+c.path, status, raw, c.want)
	}

	status, raw := httpCall(t, "GET", s.base+"/v1/models/tiny", ``)
	var card protocol.ModelCard
	if status != 200 || json.Unmarshal(raw, &card) != nil || card.ID != "tiny" || card.Object != "model" {
		t.Fatalf("GET /v1/models/tiny: %d %s", status, raw)
	}
	// MLC's ListResponse holds ModelResponses: the card is one.
	if err := mlcschema.CheckModelList([]byte(`{"object":"list","data":[` + string(bytes.TrimSpace(raw)) + `]}`)); err != nil {
		t.Fatalf("model card: %v", err)
	}
	_, list := httpCall(t, "GET", s.base+"/v1/models", ``)
	if err := mlcschema.CheckModelList(bytes.TrimSpace(list)); err != nil || !strings.Contains(string(list), fmt.Sprintf(`"created":%d`, card.Created)) {
		t.Fatalf("models: %v %s, card %s", err, list, raw)
	}

	for _, c := range []struct{ path, body string }{
		{"/v1/completions", completeHi},
		{"/v1/completions", `{"model":"","prompt":"hi","max_tokens":3}`},
		{"/v1/completions", `{"model":"tiny","prompt":"hi","max_tokens":3}`},
		{"/v1/chat/completions", chatHi},
		{"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`},
	} {
		status, raw := httpCall(t, "POST", s.base+c.path, c.body)
		var answer struct{ Model string }
		if status != 200 || json.Unmarshal(raw, &answer) != nil || answer.Model != "tiny" {
			t.Errorf("%s %s: %d %s, want an answer of model tiny", c.path, c.body, status, raw)
		}
	}

	if status, raw := httpCall(t, "GET", s.base+"/elsewhere", ``); status != 418 || string(raw) != "next handler" {
		t.Fatalf("outside the API: %d %s", status, raw)
	}
}

// The router knows its engines' context (context_window_size here) and,
// with max_tokens_policy refuse, answers OpenAI's 400 for a max_tokens or
// a prompt beyond it before any engine is asked (MLC's engines would
// generate to the context's end): not retried, not a 502, in either mode,
// on either API, streamed or not. (By default a max_tokens beyond it is
// capped: router's TestAgentRequests.)
// A request without max_tokens runs, as MLC runs it, until prompt and
// generation fill the context, and ends with "length".
func TestMaxTokensBeyondTheContext(t *testing.T) {
	// The engines' context; their KV cache holds n = 3 such sequences,
	// so that none is preempted.
	const context = 64
	tooMany := apiError{400, protocol.ErrTypeInvalidRequest, protocol.CodeContextLengthExceeded, "max_tokens"}
	tooLong := apiError{400, protocol.ErrTypeInvalidRequest, protocol.CodeContextLengthExceeded, "prompt"}
	long := strings.Repeat(" the river", context)
	for _, mode := range []string{router.ModeDisagg, router.ModeWhole} {
		t.Run(mode, func(t *testing.T) {
			s := startSite(t, 2, fmt.Sprintf("\t\t\tmode %s\n\t\t\tmax_tokens_policy refuse\n\t\t\tengine_args --overrides max_total_seq_length=%d;context_window_size=%d\n", mode, 4*context, context))
			retries := func() float64 { return metricValue(t, "caddy_mlc_retries_total") }
			before := retries()
			for _, c := range []struct {
				path, body string
				want       apiError
			}{
				{"/v1/completions", `{"prompt":"the river","max_tokens":1000000000}`, tooMany},
				{"/v1/completions", `{"prompt":"the river","max_tokens":1000000000,"stream":true}`, tooMany},
				{"/v1/completions", `{"prompt":"the river","max_tokens":1000000000,"n":3}`, tooMany},
				{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1000000000}`, tooMany},
				{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1000000000,"stream":true}`, tooMany},
				{"/v1/completions", `{"prompt":"` + long + `","max_tokens":1}`, tooLong},
				{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}],"max_tokens":1,"stream":true}`, tooLong},
			} {
				status, raw := httpCall(t, "POST", s.base+c.path, c.body)
				checkError(t, c.body, status, raw, c.want)
			}
			for _, c := range []struct {
				path, body string
				n          int
			}{
				{"/v1/completions", `{"prompt":"the river","temperature":0}`, 1},
				{"/v1/completions", `{"prompt":"the river","stream":true,"stream_options":{"include_usage":true}}`, 1},
				{"/v1/completions", `{"prompt":"the river","n":3}`, 3},
				{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`, 1},
			} {
				status, raw := httpCall(t, "POST", s.base+c.path, c.body)
				u := lastUsage(t, raw)
				if status != 200 || strings.Count(string(raw), `"finish_reason":"length"`) != c.n || u.PromptTokens+u.CompletionTokens/c.n != context {
					t.Errorf("%s: %d %s, want %d choices ending with length where the context is full", c.body, status, raw, c.n)
				}
			}
			if d := retries() - before; d != 0 {
				t.Fatalf("%v retries of requests every engine answers alike", d)
			}
		})
	}
}

// lastUsage returns the usage of a whole answer or of a stream's last
// chunk that has one.
func lastUsage(t *testing.T, raw []byte) protocol.Usage {
	t.Helper()
	var u protocol.Usage
	for _, part := range strings.Split(string(raw), "data: ") {
		var body struct{ Usage *protocol.Usage }
		if json.Unmarshal([]byte(strings.TrimSpace(part)), &body) == nil && body.Usage != nil {
			u = *body.Usage
		}
	}
	return u
}
