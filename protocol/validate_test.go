package protocol

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecodeCompletionRequestErrors(t *testing.T) {
	long := strings.Repeat("s", MaxStopBytes+1)
	many := `"` + strings.Repeat(`a","`, MaxStopStrings) + `b"`
	cases := []struct {
		name, body, param, code, msg string
	}{
		{"malformed", `{"prompt": "a",`, "", "", "invalid JSON"},
		{"not object", `[1]`, "", "", "JSON object"},
		{"empty body", ``, "", "", "empty"},
		{"trailing", `{"prompt":"a"} {}`, "", "", "after the top-level"},
		{"missing prompt", `{}`, "prompt", CodeMissingParameter, "prompt is required"},
		{"null prompt", `{"prompt":null}`, "prompt", CodeMissingParameter, "prompt is required"},
		{"empty prompt", `{"prompt":""}`, "prompt", CodeInvalidValue, "prompt is required"},
		{"empty ids", `{"prompt":[]}`, "prompt", CodeEmptyArray, "prompt is required"},
		{"negative id", `{"prompt":[1,-2]}`, "prompt[1]", CodeIntegerBelowMin, "negative"},
		{"prompt type", `{"prompt":5}`, "prompt", CodeInvalidType, "prompt must be"},
		{"prompt ids type", `{"prompt":[1,"a"]}`, "prompt", CodeInvalidType, "prompt must be"},
		{"prompt null id", `{"prompt":[1,null]}`, "prompt", CodeInvalidType, "prompt must be"},
		{"max_tokens type", `{"prompt":"a","max_tokens":"5"}`, "max_tokens", CodeInvalidType, "max_tokens: expected an integer, got string"},
		{"stream type", `{"prompt":"a","stream":"yes"}`, "stream", CodeInvalidType, "expected a boolean"},
		{"logit_bias type", `{"prompt":"a","logit_bias":[1]}`, "logit_bias", CodeInvalidType, "expected an object"},
		{"stop type", `{"prompt":"a","stop":5}`, "stop", CodeInvalidType, "stop must be"},
		{"max_tokens", `{"prompt":"a","max_tokens":0}`, "max_tokens", CodeIntegerBelowMin, "at least 1"},
		{"n zero", `{"prompt":"a","n":0}`, "n", CodeIntegerBelowMin, "at least 1"},
		{"n above 128", `{"prompt":"a","n":129}`, "n", CodeIntegerAboveMax, "at most 128"},
		{"best_of 2", `{"prompt":"a","best_of":2}`, "best_of", CodeUnsupportedValue, "best_of must be 1"},
		{"best_of 0", `{"prompt":"a","best_of":0}`, "best_of", CodeUnsupportedValue, "best_of must be 1"},
		{"freq", `{"prompt":"a","frequency_penalty":2.5}`, "frequency_penalty", CodeDecimalAboveMax, "[-2, 2]"},
		{"pres", `{"prompt":"a","presence_penalty":-3}`, "presence_penalty", CodeDecimalBelowMin, "[-2, 2]"},
		{"bias", `{"prompt":"a","logit_bias":{"5":101}}`, "logit_bias", CodeDecimalAboveMax, "[-100, 100]"},
		{"bias low", `{"prompt":"a","logit_bias":{"5":-100.5}}`, "logit_bias", CodeDecimalBelowMin, "[-100, 100]"},
		{"bias key", `{"prompt":"a","logit_bias":{"x":1}}`, "logit_bias", CodeInvalidValue, "not a token id"},
		{"bias key negative", `{"prompt":"a","logit_bias":{"-1":1}}`, "logit_bias", CodeInvalidValue, "not a token id"},
		{"bias key signed", `{"prompt":"a","logit_bias":{"+1":1}}`, "logit_bias", CodeInvalidValue, "not a token id"},
		{"bias key leading zero", `{"prompt":"a","logit_bias":{"05":1}}`, "logit_bias", CodeInvalidValue, "not a token id"},
		{"bias key too large", `{"prompt":"a","logit_bias":{"2147483648":1}}`, "logit_bias", CodeInvalidValue, "not a token id"},
		{"bias key empty", `{"prompt":"a","logit_bias":{"":1}}`, "logit_bias", CodeInvalidValue, "not a token id"},
		{"temperature low", `{"prompt":"a","temperature":-0.1}`, "temperature", CodeDecimalBelowMin, "[0, 2]"},
		{"temperature high", `{"prompt":"a","temperature":2.01}`, "temperature", CodeDecimalAboveMax, "[0, 2]"},
		{"top_p zero", `{"prompt":"a","top_p":0}`, "top_p", CodeDecimalBelowMin, "(0, 1]"},
		{"top_p big", `{"prompt":"a","top_p":1.5}`, "top_p", CodeDecimalAboveMax, "(0, 1]"},
		{"logprobs high", `{"prompt":"a","logprobs":6}`, "logprobs", CodeIntegerAboveMax, "at most 5"},
		{"logprobs low", `{"prompt":"a","logprobs":-1}`, "logprobs", CodeIntegerBelowMin, "at least 0"},
		{"stop too many", `{"prompt":"a","stop":[` + many + `]}`, "stop", CodeArrayTooLong, "at most 16"},
		{"stop too long", `{"prompt":"a","stop":["x","` + long + `"]}`, "stop[1]", CodeStringTooLong, "at most 256 bytes"},
		{"stop_options", `{"prompt":"a","stream_options":{"include_usage":true}}`, "stream_options", CodeInvalidValue, "only allowed"},
		{"response_format", `{"prompt":"a","response_format":{"type":"xml"}}`, "response_format.type", CodeInvalidValue, "json_object"},
		{"response_format schema", `{"prompt":"a","response_format":{"type":"json_object","schema":"{\"type\":\"array\",\"contains\":{},\"maxContains\":3}"}}`, "response_format.schema.maxContains", CodeUnsupportedValue, "maxContains"},
		{"special_request", `{"prompt":"a","debug_config":{"special_request":"x"}}`, "debug_config.special_request", CodeInvalidValue, "query_engine_metrics"},
		{"grammar mode", `{"prompt":"a","debug_config":{"grammar_execution_mode":"x"}}`, "debug_config.grammar_execution_mode", CodeInvalidValue, "jump_forward"},
		{"disagg kind", `{"prompt":"a","debug_config":{"disagg_config":{"kind":"x"}}}`, "debug_config.disagg_config.kind", CodeInvalidValue, "remote_send"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := DecodeCompletionRequest(strings.NewReader(c.body), 0)
			checkError(t, e, c.param, c.code, c.msg)
		})
	}
}

// checkError asserts a 400 invalid_request_error with the given param (or
// none, when param is empty), code (when not empty) and a message that
// contains msg.
func checkError(t *testing.T, e *Error, param, code, msg string) {
	t.Helper()
	if e == nil {
		t.Fatal("no error")
	}
	if e.Status != http.StatusBadRequest || e.Type != ErrTypeInvalidRequest {
		t.Fatalf("status %d type %s", e.Status, e.Type)
	}
	if !strings.Contains(e.Message, msg) {
		t.Fatalf("message %q lacks %q", e.Message, msg)
	}
	if got := deref(e.Param); got != param {
		t.Fatalf("param = %q, want %q (%s)", got, param, e.Message)
	}
	if code != "" && deref(e.Code) != code {
		t.Fatalf("code = %q, want %q (%s)", deref(e.Code), code, e.Message)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Values JSON cannot carry (NaN, infinities) come from Go callers; every
// range excludes them.
func TestSamplingRejectsNaNAndInfinities(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, c := range []struct {
			param string
			s     Sampling
		}{
			{"temperature", Sampling{Temperature: &v}},
			{"top_p", Sampling{TopP: &v}},
			{"frequency_penalty", Sampling{FrequencyPenalty: &v}},
			{"presence_penalty", Sampling{PresencePenalty: &v}},
			{"logit_bias", Sampling{LogitBias: map[string]float64{"3": v}}},
		} {
			e := c.s.Validate()
			if e == nil || deref(e.Param) != c.param || e.Code == nil {
				t.Fatalf("%s = %v: %+v", c.param, v, e)
			}
		}
	}
}

// The bounds themselves are allowed.
func TestSamplingAcceptsBounds(t *testing.T) {
	stops := make(StopList, 0, MaxStopStrings+3)
	for range MaxStopStrings {
		stops = append(stops, strings.Repeat("x", MaxStopBytes))
	}
	stops = append(stops, "", "", "") // empty strings are ignored, not counted
	for _, s := range []Sampling{
		{N: new(MaxN), BestOf: new(1), MaxTokens: new(1), Stop: stops},
		{Temperature: new(0.0), TopP: new(1.0), FrequencyPenalty: new(-2.0), PresencePenalty: new(2.0)},
		{Temperature: new(2.0), TopP: new(1e-9), LogitBias: map[string]float64{"0": -100, "2147483647": 100}},
	} {
		if e := s.Validate(); e != nil {
			t.Fatalf("%+v: %v", s, e)
		}
	}
}

// With several bad logit_bias keys, the error names the same one every
// time (the first in order), not whichever the map yields first.
func TestLogitBiasErrorIsDeterministic(t *testing.T) {
	bias := map[string]float64{}
	for i := range 50 {
		bias[fmt.Sprintf("x%02d", i)] = 1
	}
	for range 20 {
		e := Sampling{LogitBias: bias}.Validate()
		if e == nil || !strings.Contains(e.Message, `"x00"`) {
			t.Fatalf("got %v", e)
		}
	}
}

// A body over the limit, ours or an http.MaxBytesReader's (Caddy's
// request_body), is a 413, not a 400: the request may be fine.
func TestBodyLimit(t *testing.T) {
	body := `{"prompt":"` + strings.Repeat("a", 100) + `"}`
	tooLarge := func(what string, e *Error) {
		t.Helper()
		if e == nil || e.Status != http.StatusRequestEntityTooLarge || e.Type != ErrTypeInvalidRequest || e.Code == nil || *e.Code != CodeRequestTooLarge {
			t.Fatalf("%s: %+v", what, e)
		}
	}
	_, e := DecodeCompletionRequest(strings.NewReader(body), 50)
	tooLarge("over the limit", e)
	_, e = ReadBody(http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(body)), 50), 1000)
	tooLarge("over a MaxBytesReader's limit", e)
	if _, e := DecodeCompletionRequest(strings.NewReader(body), int64(len(body))); e != nil {
		t.Fatalf("body at the limit: %v", e)
	}
	if _, e := ReadBody(strings.NewReader(" "), 50); e == nil || e.Status != http.StatusBadRequest {
		t.Fatalf("empty body: %+v", e)
	}
}

// An engine takes logprobs up to the chat bound (a router forwards a
// chat's top_logprobs as logprobs); a client's completion request, up to
// the completion bound.
func TestEngineLogprobsBound(t *testing.T) {
	for _, c := range []struct {
		k              int
		client, engine bool
	}{{MaxCompletionLogprobs, true, true}, {MaxCompletionLogprobs + 1, false, true}, {MaxChatTopLogprobs, false, true}, {MaxChatTopLogprobs + 1, false, false}} {
		body := fmt.Sprintf(`{"prompt":"a","logprobs":%d}`, c.k)
		_, ce := DecodeCompletionRequest(strings.NewReader(body), 0)
		_, ee := DecodeEngineRequest(strings.NewReader(body), 0)
		if (ce == nil) != c.client || (ee == nil) != c.engine {
			t.Errorf("logprobs %d: client %v, engine %v", c.k, ce, ee)
		}
		if ee != nil && (ee.Param == nil || *ee.Param != "logprobs") {
			t.Errorf("logprobs %d: %+v", c.k, ee)
		}
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
