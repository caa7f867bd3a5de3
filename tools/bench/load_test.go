package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// sseServer answers every completion with the given events, each flushed.
func sseServer(t *testing.T, events ...string) *party {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "%s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return &party{key: "test", urls: []string{srv.URL}, http: newClient(4)}
}

func TestStreamMeasuresEveryEventButDone(t *testing.T) {
	p := sseServer(t, `data: {"choices":[{"text":"a"}]}`, ": keep-alive", `data: {"choices":[{"text":"b"}]}`, `data: {"choices":[{"text":"c"}]}`, "data: [DONE]")
	s := p.do(context.Background(), []byte(`{}`), true)
	if s.err != nil || s.ttft <= 0 || len(s.gaps) != 2 || s.latency < s.ttft {
		t.Errorf("sample %+v; want a TTFT, 2 gaps (3 events, the comment and [DONE] aside), latency ≥ TTFT", s)
	}
}

func TestStreamErrors(t *testing.T) {
	for name, c := range map[string]struct {
		events []string
		want   string
	}{
		"no [DONE]":   {[]string{`data: {"choices":[{"text":"a"}]}`}, errNoDone.Error()},
		"error event": {[]string{`data: {"choices":[{"text":"a"}]}`, `data: {"error":{"message":"engine lost"}}`}, "engine lost"},
	} {
		p := sseServer(t, c.events...)
		if s := p.do(context.Background(), []byte(`{}`), true); s.err == nil || !strings.Contains(s.err.Error(), c.want) {
			t.Errorf("%s: err %v, want one that says %q", name, s.err, c.want)
		}
	}
}

func TestStatusAndBodyAreChecked(t *testing.T) {
	unavailable := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unavailable {
			http.Error(w, `{"error":{"message":"no engine"}}`, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"choices":[]}`)
	}))
	defer srv.Close()
	p := &party{urls: []string{srv.URL}, http: newClient(1)}
	if s := p.do(context.Background(), []byte(`{}`), false); s.err == nil || !strings.Contains(s.err.Error(), "503") {
		t.Errorf("503: err %v", s.err)
	}
	unavailable = false
	if s := p.do(context.Background(), []byte(`{}`), false); s.err == nil || !strings.Contains(s.err.Error(), "no choice") {
		t.Errorf("an answer without a choice: err %v", s.err)
	}
}

func TestSplitPartyAlternates(t *testing.T) {
	p := &party{urls: []string{"a", "b"}}
	var got []string
	for range 4 {
		got = append(got, p.url())
	}
	if strings.Join(got, "") != "abab" {
		t.Errorf("urls in turn: %v, want a b a b", got)
	}
}

func TestSegmentSendsEveryBodyOnceAndStopsOnCancel(t *testing.T) {
	_, p := stubParty(t)
	r := row{conc: 3, stream: false, maxTokens: 4}
	reqs := bodies(1, r, 0, 10, 8)
	samples, wall := p.segment(context.Background(), r, reqs)
	for i, s := range samples {
		if s.err != nil || s.latency <= 0 {
			t.Errorf("request %d: %+v", i, s)
		}
	}
	if wall <= 0 {
		t.Errorf("wall time %v", wall)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	samples, _ = p.segment(ctx, r, reqs)
	for i, s := range samples {
		if s.err != nil && !errors.Is(s.err, context.Canceled) {
			t.Errorf("cancelled segment, request %d: %v", i, s.err)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Error("a cancelled segment took more than 5 s")
	}
}

func TestBodiesAreTheSameForEveryPartyAndDifferByRound(t *testing.T) {
	r := row{conc: 16, stream: true, maxTokens: 64}
	a, b, c := bodies(1, r, 0, 5, 32), bodies(1, r, 0, 5, 32), bodies(1, r, 1, 5, 32)
	for i := range a {
		if string(a[i]) != string(b[i]) {
			t.Fatalf("body %d differs between two calls with the same seed", i)
		}
		if string(a[i]) == string(c[i]) {
			t.Errorf("body %d is the same in rounds 0 and 1", i)
		}
		if !strings.Contains(string(a[i]), `"max_tokens":64`) || !strings.Contains(string(a[i]), `"stream":true`) || !strings.Contains(string(a[i]), `"temperature":0`) {
			t.Errorf("body %s", a[i])
		}
	}
}
