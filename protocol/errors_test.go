package protocol

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// ParseError reads the router's and the built-in engine's OpenAI bodies
// and mlc_llm serve's own ErrorResponse, plain or JSON-encoded again as a
// string (as MLC's server sends it).
func TestParseError(t *testing.T) {
	mlc := `{"object":"error","message":"bad prompt","code":400}`
	doubled, _ := json.Marshal(mlc)
	for _, c := range []struct {
		name, body string
		status     int
		msg, typ   string
	}{
		{"openai", `{"error":{"message":"m","type":"invalid_request_error","param":"n","code":"integer_above_max_value"}}`, 400, "m", ErrTypeInvalidRequest},
		{"mlc", mlc, 400, "bad prompt", ErrTypeInvalidRequest},
		{"mlc as a string", string(doubled), 400, "bad prompt", ErrTypeInvalidRequest},
		{"mlc server error", `{"object":"error","message":"boom"}`, 500, "boom", ErrTypeServer},
		{"not an error", `{"object":"text_completion","choices":[]}`, 502, "", ""},
		{"a string", `"hello"`, 400, "", ""},
		{"garbage", `<html>`, 502, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := ParseError(c.status, []byte(c.body))
			if c.msg == "" {
				if e != nil {
					t.Fatalf("parsed %+v", e)
				}
				return
			}
			if e == nil || e.Message != c.msg || e.Type != c.typ || e.Status != c.status {
				t.Fatalf("got %+v", e)
			}
		})
	}
}

// An error is answered in Anthropic's shape on the Messages API's paths,
// in OpenAI's elsewhere, with its status either way.
func TestErrorWriteFor(t *testing.T) {
	for path, wantType := range map[string]string{
		PathMessages:                   "error",
		PathMessages + "/count_tokens": "error",
		"/v1/chat/completions":         "",
	} {
		w := httptest.NewRecorder()
		Errorf(http.StatusUnauthorized, ErrTypeInvalidRequest, "no key").WithCode("invalid_api_key").WriteFor(w, path)
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v: %s", path, err, w.Body)
		}
		if w.Code != http.StatusUnauthorized || body.Type != wantType || body.Error.Message != "no key" {
			t.Errorf("%s: %d %s, want 401 with top-level type %q", path, w.Code, w.Body, wantType)
		}
	}
}
