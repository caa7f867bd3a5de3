package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// While the server shuts down, readiness is a 503 that says why, and an
// API request a 503 shutting_down with Retry-After.
func TestShuttingDownAnswers(t *testing.T) {
	w := httptest.NewRecorder()
	ServeShuttingDown(w)
	var ready struct {
		Ready   bool     `json:"ready"`
		Missing []string `json:"missing"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ready); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusServiceUnavailable || ready.Ready || len(ready.Missing) != 1 || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("readiness: %d %v %s", w.Code, w.Header(), w.Body)
	}
	e := ShuttingDownError()
	if e.Status != http.StatusServiceUnavailable || e.Code == nil || *e.Code != "shutting_down" || e.RetryAfter != 2*time.Second {
		t.Errorf("refusal: %+v", e)
	}
}
