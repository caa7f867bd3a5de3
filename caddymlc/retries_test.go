package caddymlc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// scriptedEngine is an engine that answers its generations in turn from
// a script (a text and a finish reason each) and reports a fixed load.
type scriptedEngine struct {
	srv     *httptest.Server
	running int // the load it reports: sequences of others

	mu     sync.Mutex
	script []scriptedAnswer
	calls  int
	polls  atomic.Int64
}

// scriptedAnswer is one generation: its text, then its finish reason, or
// with finish "" a stream that breaks off after the text.
type scriptedAnswer struct{ text, finish string }

func newScriptedEngine(t *testing.T, running int, script ...scriptedAnswer) *scriptedEngine {
	e := &scriptedEngine{running: running, script: script}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *scriptedEngine) addr() string { return e.srv.Listener.Addr().String() }

func (e *scriptedEngine) generations() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

func (e *scriptedEngine) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != protocol.PathCompletions {
		w.Write([]byte(`{"object":"list","data":[{"id":"tiny","object":"model"}]}`))
		return
	}
	var req protocol.CompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if d := req.DebugConfig; d != nil && d.SpecialRequest != nil && *d.SpecialRequest == protocol.SpecialQueryEngineMetrics {
		e.polls.Add(1)
		fmt.Fprintf(w, `{"id":"m","object":"text_completion","created":1,"model":"tiny","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,"extra":{"running":%d,"waiting":0}}}`, e.running)
		return
	}
	e.mu.Lock()
	a := scriptedAnswer{" unscripted", "length"}
	if e.calls < len(e.script) {
		a = e.script[e.calls]
	}
	e.calls++
	e.mu.Unlock()
	text, _ := json.Marshal(a.text)
	w.Header().Set("Content-Type", "text/event-stream")
	if a.finish == "" {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\",\"choices\":[{\"index\":0,\"text\":%s,\"finish_reason\":null}]}\n\n", text)
		return // broken off: no finish, no [DONE]
	}
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\",\"choices\":[{\"index\":0,\"text\":%s,\"finish_reason\":%q}]}\n\n", text, a.finish)
	if a.finish != protocol.FinishPreempt {
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n")
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// An attempt an engine preempted (short of KV memory) goes on elsewhere,
// though the policy prefers the engine that preempted it: retried there
// it would wait for the memory others hold. Only the next attempt avoids
// it: a preemption blames nobody.
func TestPreemptedAttemptGoesElsewhere(t *testing.T) {
	// a is idle, b reports work of others: least_loaded prefers a.
	a := newScriptedEngine(t, 0, scriptedAnswer{" the", protocol.FinishPreempt}, scriptedAnswer{" sat", "length"})
	b := newScriptedEngine(t, 3, scriptedAnswer{" cat", protocol.FinishPreempt})
	port := freePorts(t, 1)[0]
	reloadSite(t, port, fmt.Sprintf("\t\tmode round_robin\n\t\tendpoint %s external\n\t\tendpoint %s external\n", a.addr(), b.addr()))
	t.Cleanup(func() { stopCaddy(t) })
	// Two polls answered: the router has b's load.
	waitFor(t, "the router to hear the engines' load", func() bool { return a.polls.Load() >= 2 && b.polls.Load() >= 2 })

	body := greedy("the cat", 3)
	body["stream"] = true
	raw := post(t, fmt.Sprintf("http://127.0.0.1:%d%s", port, protocol.PathCompletions), body, http.StatusOK)
	if got := streamedText(t, raw); got != " the cat sat" {
		t.Fatalf("text %q, want %q (a preempted, then b, then a)", got, " the cat sat")
	}
	if na, nb := a.generations(), b.generations(); na != 2 || nb != 1 {
		t.Fatalf("generations: %d on a, %d on b; want 2 and 1", na, nb)
	}
}

// The backoff before a retry grows with the failures in a row that
// delivered nothing, not with the attempts of the request's whole life: a
// long stream that lost its engine many times, each time after some
// text, resumes at once every time (counted over a request's life, the
// eighth attempt would wait 640 ms, 1.27 s in all before it).
func TestBackoffCountsFruitlessFailures(t *testing.T) {
	const breaks = 8
	var script []scriptedAnswer
	for range breaks {
		script = append(script, scriptedAnswer{" the", ""})
	}
	e := newScriptedEngine(t, 0, append(script, scriptedAnswer{" end", "length"})...)
	port := freePorts(t, 1)[0]
	reloadSite(t, port, fmt.Sprintf("\t\tmode round_robin\n\t\tmax_attempts 16\n\t\tendpoint %s external\n", e.addr()))
	t.Cleanup(func() { stopCaddy(t) })
	body := greedy("the cat", breaks+1)
	body["stream"] = true
	begin := time.Now()
	raw := post(t, fmt.Sprintf("http://127.0.0.1:%d%s", port, protocol.PathCompletions), body, http.StatusOK)
	took := time.Since(begin)
	if got := streamedText(t, raw); got != strings.Repeat(" the", breaks)+" end" {
		t.Fatalf("text %q", got)
	}
	if n := e.generations(); n != breaks+1 {
		t.Fatalf("%d generations, want %d", n, breaks+1)
	}
	if took > time.Second {
		t.Errorf("%d resumptions after progress took %v", breaks, took)
	}
}

// streamedText is the text of a streamed completion's events.
func streamedText(t *testing.T, raw []byte) string {
	t.Helper()
	var text strings.Builder
	for ev := range strings.SplitSeq(string(raw), "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c protocol.CompletionResponse
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
		}
	}
	return text.String()
}

// A streamed generation whose first token waits behind the engine's
// other work is not given up at engine_timeout while the engine gives
// other calls tokens: it is busy, not silent. Given up, the call would
// lose its place and wait as long elsewhere (a crowd of resumed streams
// did so together, engine after engine). Once the engine falls silent
// for the timeout, it is given up.
func TestQueuedFirstTokenOnABusyEngine(t *testing.T) {
	const engineTimeout = 500 * time.Millisecond
	var calls atomic.Int64
	release := make(chan struct{}) // the queued call's first token
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != protocol.PathCompletions {
			w.Write([]byte(`{"object":"list","data":[{"id":"tiny","object":"model"}]}`))
			return
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), protocol.SpecialQueryEngineMetrics) {
			w.Write([]byte(`{"id":"m","object":"text_completion","created":1,"model":"tiny","choices":[]}`))
			return
		}
		event := func(text, finish string) {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"tiny\",\"choices\":[{\"index\":0,\"text\":%q,\"finish_reason\":%s}]}\n\n", text, f)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch calls.Add(1) {
		case 1: // the busy part: a token every 50 ms until the queued call got its own (5 s at most)
			for range 100 {
				select {
				case <-release:
					event(" the", "length")
					fmt.Fprint(w, "data: [DONE]\n\n")
					return
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
					event(" the", "")
				}
			}
			event(" the", "length")
		case 2: // queued: its first token after three engine timeouts
			select {
			case <-time.After(3 * engineTimeout):
			case <-r.Context().Done():
				return
			}
			close(release)
			event(" cat", "length")
		case 3: // alone on the engine, silent for two engine timeouts
			select {
			case <-time.After(2 * engineTimeout):
			case <-r.Context().Done():
				return
			}
			event(" cow", "length")
		default: // its retry, answered at once
			event(" dog", "length")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	port := freePorts(t, 1)[0]
	reloadSite(t, port, fmt.Sprintf("\t\tmode round_robin\n\t\tengine_timeout %v\n\t\tendpoint %s external\n", engineTimeout, srv.Listener.Addr()))
	t.Cleanup(func() { stopCaddy(t) })
	url := fmt.Sprintf("http://127.0.0.1:%d%s", port, protocol.PathCompletions)
	streamed := func(prompt string, n int) string {
		body := greedy(prompt, n)
		body["stream"] = true
		return streamedText(t, post(t, url, body, http.StatusOK))
	}
	busy := make(chan string)
	go func() { busy <- streamed("the cat", 1000) }()
	waitFor(t, "the busy call", func() bool { return calls.Load() >= 1 })
	if got := streamed("the dog", 1); got != " cat" {
		t.Errorf("the queued call: %q, want its own first token (%d engine calls)", got, calls.Load())
	}
	<-busy
	// Nothing else runs now: a first token that does not come within the
	// timeout is given up (the retry's answer shows).
	if got := streamed("the dog", 1); got != " dog" {
		t.Errorf("a call on a silent engine: %q", got)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("%d engine calls, want 4 (busy, queued, given up, its retry)", n)
	}
}
