package protocol

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecodeCompletionRequestErrors(t *testing.T) {
	cases := []struct {
		name, body, param, msg string
	}{
		{"malformed", `{"prompt": "a",`, "", "invalid JSON"},
		{"not object", `[1]`, "", "JSON object"},
		{"empty body", ``, "", "empty"},
		{"trailing", `{"prompt":"a"} {}`, "", "after the top-level"},
		{"missing prompt", `{}`, "prompt", "prompt is required"},
		{"empty prompt", `{"prompt":""}`, "prompt", "prompt is required"},
		{"empty ids", `{"prompt":[]}`, "prompt", "prompt is required"},
		{"negative id", `{"prompt":[1,-2]}`, "prompt", "negative"},
		{"prompt type", `{"prompt":5}`, "", "prompt must be"},
		{"max_tokens type", `{"prompt":"a","max_tokens":"5"}`, "max_tokens", "max_tokens: expected an integer, got string"},
		{"stream type", `{"prompt":"a","stream":"yes"}`, "stream", "expected a boolean"},
		{"max_tokens", `{"prompt":"a","max_tokens":0}`, "max_tokens", "at least 1"},
		{"n", `{"prompt":"a","n":0}`, "n", "at least 1"},
		{"freq", `{"prompt":"a","frequency_penalty":2.5}`, "frequency_penalty", "[-2, 2]"},
		{"pres", `{"prompt":"a","presence_penalty":-3}`, "presence_penalty", "[-2, 2]"},
		{"bias", `{"prompt":"a","logit_bias":{"5":101}}`, "logit_bias", "[-100, 100]"},
		{"bias key", `{"prompt":"a","logit_bias":{"x":1}}`, "logit_bias", "not a token id"},
		{"temperature", `{"prompt":"a","temperature":-0.1}`, "temperature", "at least 0"},
		{"top_p zero", `{"prompt":"a","top_p":0}`, "top_p", "(0, 1]"},
		{"top_p big", `{"prompt":"a","top_p":1.5}`, "top_p", "(0, 1]"},
		{"stream_options", `{"prompt":"a","stream_options":{"include_usage":true}}`, "stream_options", "only allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := DecodeCompletionRequest(strings.NewReader(c.body), 0)
			if e == nil {
				t.Fatal("no error")
			}
			if e.Status != http.StatusBadRequest || e.Type != ErrTypeInvalidRequest {
				t.Fatalf("status %d type %s", e.Status, e.Type)
			}
			if !strings.Contains(e.Message, c.msg) {
				t.Fatalf("message %q lacks %q", e.Message, c.msg)
			}
			if c.param != "" && (e.Param == nil || *e.Param != c.param) {
				t.Fatalf("param = %v, want %s", e.Param, c.param)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	body := `{"prompt":"` + strings.Repeat("a", 100) + `"}`
	if _, e := DecodeCompletionRequest(strings.NewReader(body), 50); e == nil || e.Code == nil || *e.Code != "request_too_large" {
		t.Fatalf("over-limit body: %v", e)
	}
	if _, e := DecodeCompletionRequest(strings.NewReader(body), int64(len(body))); e != nil {
		t.Fatalf("body at the limit: %v", e)
	}
}

func TestValidRequest(t *testing.T) {
	r, e := DecodeCompletionRequest(strings.NewReader(`{"prompt":[1,2],"n":2,"top_p":1,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`), 0)
	if e != nil {
		t.Fatal(e)
	}
	if r.NOr() != 2 || !r.IncludeUsage() || r.MaxTokensOr(7) != 7 {
		t.Fatalf("%+v", r)
	}
}

func TestErrorWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	InvalidRequest("n", "bad n").Write(rec)
	if rec.Code != 400 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	e := ParseError(rec.Code, rec.Body.Bytes())
	if e == nil || e.Message != "bad n" || *e.Param != "n" || e.Type != ErrTypeInvalidRequest {
		t.Fatalf("parsed %+v from %s", e, rec.Body.String())
	}
	if !strings.Contains(rec.Body.String(), `"code":null`) {
		t.Fatalf("body lacks code: %s", rec.Body.String())
	}
}
