package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// stubParty is a client straight to a stub engine.
func stubParty(t *testing.T) (*stubEngine, *party) {
	t.Helper()
	stub, err := startStub()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stub.close)
	p := &party{key: "stub", urls: []string{stub.url}, http: idleClient("h1", 64)}
	t.Cleanup(p.http.CloseIdleConnections)
	return stub, p
}

func TestStubHoldsMarkedStreamsUntilReleased(t *testing.T) {
	stub, p := stubParty(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 20
	streams := openIdle(ctx, p, n)
	defer streams.stop()
	if err := streams.waitOpen(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stub.waitHeld(ctx, n); err != nil {
		t.Fatalf("stub holds %d streams: %v", stub.held.Load(), err)
	}
	// A request that is not marked is answered while the others are held,
	// streamed or not: a router's probes and load queries must pass.
	r := row{conc: 2, stream: true, maxTokens: 4}
	samples, _ := p.segment(ctx, r, bodies(1, r, 0, 4, 8))
	for _, s := range samples {
		if s.err != nil || s.ttft <= 0 || len(s.gaps) != 1 {
			t.Errorf("unmarked stream while others are held: err %v, ttft %v, %d gaps; want a whole two-event stream", s.err, s.ttft, len(s.gaps))
		}
	}
	if s := p.do(ctx, []byte(`{"prompt":[5,6,7,8],"max_tokens":1}`), false); s.err != nil {
		t.Errorf("non-streamed request of the marked prompt: %v", s.err)
	}
	if got := streams.opened.Load(); got != n {
		t.Errorf("%d streams open, want %d", got, n)
	}
	stub.release()
	streams.all.Wait()
	if streams.failed.Load() != 0 {
		t.Errorf("%d streams failed after release: %v", streams.failed.Load(), streams.firstErr())
	}
	if err := stub.waitHeld(ctx, 0); err != nil {
		t.Errorf("stub still holds %d streams", stub.held.Load())
	}
}

func TestStoppedStreamsEndAndCountAsFailed(t *testing.T) {
	stub, p := stubParty(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	streams := openIdle(ctx, p, 5)
	if err := streams.waitOpen(ctx); err != nil {
		t.Fatal(err)
	}
	streams.stop() // without release: the client gives up
	if got := streams.failed.Load(); got != 5 || !errors.Is(streams.firstErr(), context.Canceled) {
		t.Errorf("%d failed, first %v; want 5, context canceled", got, streams.firstErr())
	}
	if err := stub.waitHeld(ctx, 0); err != nil {
		t.Errorf("stub still holds %d streams after the clients left", stub.held.Load())
	}
}

func TestStubSpeaksEnoughOfMLC(t *testing.T) {
	stub, p := stubParty(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, stub.url+"/v1/models", nil)
	resp, err := p.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var models protocol.ModelList
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "tiny" {
		t.Errorf("GET /v1/models: %+v, %v; want the model tiny", models, err)
	}
	text, err := p.text(ctx, []byte(`{"prompt":[9,9],"max_tokens":2,"debug_config":{"special_request":"query_engine_metrics"}}`), false)
	if err != nil || text != stubWord {
		t.Errorf("load query: %q, %v; want %q", text, err, stubWord)
	}
	if s := p.do(ctx, []byte(`{"prompt":`), false); s.err == nil || !strings.Contains(s.err.Error(), "400") {
		t.Errorf("bad JSON: %v, want a 400", s.err)
	}
}
