package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// routeLog is a selection policy that records the hooks of its routes.
type routeLog struct {
	LeastLoaded
	mu     sync.Mutex
	events []string
	err    error // the Failed hook's
}

func (o *routeLog) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *routeLog) Routed(*Route)     { o.add("routed") }
func (o *routeLog) FirstToken(*Route) { o.add("first token") }
func (o *routeLog) Finished(_ *Route, u *Usage) {
	if u != nil {
		o.add("finished with usage")
		return
	}
	o.add("finished")
}

func (o *routeLog) Failed(_ *Route, err error) {
	o.add("failed")
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = err
}

const (
	chunkA    = `data: {"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"a"}]}` + "\n\n"
	chunkStop = `data: {"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"b","finish_reason":"stop"}]}` + "\n\n"
	chunkUse  = `data: {"id":"c","object":"text_completion","model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}` + "\n\n"
	done      = "data: [DONE]\n\n"
	chatter   = `data: {"id":"c","object":"text_completion","model":"m","choices":[]}` + "\n\n"
)

// readToEnd reads an attempt: every chunk to the end, and an answer
// without a finish reason is bad, as choiceJob.read has it.
func readToEnd(g *attempt) error {
	finished := false
	for {
		c, err := g.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		for _, ch := range c.Choices {
			finished = finished || ch.Finished() != ""
		}
	}
	if !finished {
		return badAnswer("stream", &g.l.proc, "an answer without a finish reason", errors.New("no finish reason"))
	}
	return nil
}

// One attempt on one engine, whatever becomes of it: its strategy, which
// acquired the engine, releases it; the route hears Routed, then exactly
// one of Finished or Failed; the engine's breaker hears the verdict the
// engine earned (served resets its failures, a bad or failed answer adds
// one, a caller's doing neither); a stream's first token is heard only
// when the stream moved.
func TestTheLeaseOwnerReportsEveryOutcome(t *testing.T) {
	errStop := errors.New("the reader stopped")
	for _, c := range []struct {
		name   string
		stream bool
		engine func(w http.ResponseWriter, r *http.Request)
		read   func(*attempt) error
		events []string
		fails  int // breaker failures after, from one
		err    func(error) bool
	}{
		{name: "stream served", stream: true,
			engine: sse(chunkA, chunkStop, chunkUse, done),
			events: []string{"routed", "first token", "finished with usage"}, fails: 0},
		{name: "stream broken before [DONE]", stream: true,
			engine: sse(chunkA),
			events: []string{"routed", "first token", "failed"}, fails: 2},
		{name: "stream without a finish reason", stream: true,
			engine: sse(chunkA, done),
			events: []string{"routed", "first token", "failed"}, fails: 2},
		{name: "stream of chatter only", stream: true,
			engine: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for r.Context().Err() == nil {
					io.WriteString(w, chatter)
					w.(http.Flusher).Flush()
					time.Sleep(10 * time.Millisecond) // the engine's pace, not synchronisation
				}
			},
			events: []string{"routed", "failed"}, fails: 2,
			err: func(err error) bool { return errors.Is(err, errEngineSilent) }},
		{name: "stream the reader stops early", stream: true,
			engine: sse(chunkA, chunkStop, chunkUse, done),
			read:   func(g *attempt) error { _, err := g.next(); return err },
			events: []string{"routed", "first token", "finished"}, fails: 1},
		{name: "stream the client left", stream: true,
			engine: sse(chunkA, chunkStop, chunkUse, done),
			read:   func(g *attempt) error { g.next(); return errStop },
			events: []string{"routed", "first token", "failed"}, fails: 1,
			err: func(err error) bool { return err == errStop }},
		{name: "whole answer served",
			engine: whole(`{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"ab","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`),
			events: []string{"routed", "finished with usage"}, fails: 0},
		{name: "whole answer without a finish reason",
			engine: whole(`{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"ab"}]}`),
			events: []string{"routed", "failed"}, fails: 2},
		{name: "engine failure", stream: true,
			engine: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) },
			events: []string{"routed", "failed"}, fails: 2},
		{name: "request refused", stream: true,
			engine: func(w http.ResponseWriter, r *http.Request) {
				protocol.Errorf(http.StatusBadRequest, protocol.ErrTypeInvalidRequest, "no").Write(w)
			},
			events: []string{"routed", "failed"}, fails: 0},
		{name: "reader panics", stream: true,
			engine: sse(chunkA, chunkStop, chunkUse, done),
			read:   func(*attempt) error { panic("reader") },
			events: []string{"routed", "failed"}, fails: 1,
			err: func(err error) bool { return err == ErrRouteDropped }},
	} {
		t.Run(c.name, func(t *testing.T) {
			lf := fleetServing(t, 1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					w.Write([]byte(`{"object":"list","data":[]}`))
					return
				}
				io.Copy(io.Discard, r.Body)
				c.engine(w, r)
			}))
			log := &routeLog{}
			r := testRouter(t, lf, log)
			r.client = newEngineClient(300*time.Millisecond, zap.NewNop(), new(descriptorLog))
			t.Cleanup(r.client.close)
			u := lf.upstreams[0]
			_, pid := u.status()
			u.breaker.failure(pid)
			read := c.read
			if read == nil {
				read = readToEnd
			}
			req := &protocol.CompletionRequest{Prompt: protocol.TokenPrompt([]int{1}), Stream: c.stream}
			// As choiceJob.run: the strategy starts the attempt, the
			// reader reads it, and it is closed with the reader's error,
			// or, when the reader panics, as a dropped route.
			a, err := (&wholeRequest{r}).start(context.Background(), req, nil)
			if err == nil {
				func() {
					defer func() {
						if recover() != nil {
							err = ErrRouteDropped
						}
						a.Close(err)
					}()
					err = read(a)
				}()
			}
			if n, p := u.inflight.Load(), u.prefilling.Load(); n != 0 || p != 0 {
				t.Errorf("%d calls in flight, %d prefilling after the attempt", n, p)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if !slices.Equal(log.events, c.events) {
				t.Errorf("hooks heard %q, want %q (err %v)", log.events, c.events, err)
			}
			if f, _ := u.breaker.badness(); f != c.fails {
				t.Errorf("breaker failures %d after the attempt, want %d (err %v)", f, c.fails, err)
			}
			if c.err != nil && !c.err(log.err) {
				t.Errorf("the route failed with %v", log.err)
			}
			if strings.HasPrefix(c.events[len(c.events)-1], "failed") != (log.err != nil) {
				t.Errorf("Failed heard %v", log.err)
			}
		})
	}
}

// sse answers a streamed completion with events.
func sse(events ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Join(events, ""))
	}
}

// whole answers a completion with one JSON body.
func whole(body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}
