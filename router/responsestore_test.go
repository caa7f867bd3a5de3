package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/responsestore"
)

// memStore is a responsestore.Store in memory.
type memStore struct {
	mu   sync.Mutex
	recs map[[2]string][]byte
}

func (s *memStore) Put(_ context.Context, tenant, id string, record []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = map[[2]string][]byte{}
	}
	s.recs[[2]string{tenant, id}] = record
	return nil
}

func (s *memStore) Get(_ context.Context, tenant, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.recs[[2]string{tenant, id}]
	return b, ok, nil
}

func (s *memStore) Delete(_ context.Context, tenant, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.recs[[2]string{tenant, id}]
	delete(s.recs, [2]string{tenant, id})
	return ok, nil
}

// storingFront serves the core's model with responses stored in a
// memStore, each record at most maxBytes (0: the default), the tenant
// named by the X-Tenant header; it returns its URL.
func storingFront(t *testing.T, c *core, maxBytes int) string {
	m := NewModels([]*Router{c.r}, 0)
	m.StoreResponses(&memStore{}, maxBytes)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		m.ServeHTTP(w, req.WithContext(WithFacts(req.Context(), Facts{Tenant: req.Header.Get("X-Tenant")})))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// respond posts a Responses request for tenant and returns the response.
func respond(t *testing.T, base, tenant string, body map[string]any) protocol.Response {
	t.Helper()
	status, raw := callJSON(t, http.MethodPost, base+protocol.PathResponses, body, "X-Tenant", tenant)
	var r protocol.Response
	if status != http.StatusOK || json.Unmarshal(raw, &r) != nil {
		t.Fatalf("%d %s", status, raw)
	}
	return r
}

// A conversation of three turns through previous_response_id has the
// text the same turns have as chat messages (greedy), streamed or whole;
// the stored response reads back, its input items listed; once deleted
// it is a 404, to read, to delete and to continue.
func TestResponsesConversation(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	base := storingFront(t, c, 0)
	const instructions = "You answer in one line."
	chat := []map[string]any{{"role": "system", "content": instructions}}
	prev := ""
	var last protocol.Response
	for turn, input := range []string{"the cat sat on", "and the dog?", "and the bird?"} {
		chat = append(chat, map[string]any{"role": "user", "content": input})
		want, _, _ := chatAnswer(t, c.base, chat, 8)
		body := map[string]any{"instructions": instructions, "input": input, "max_output_tokens": 8, "temperature": 0}
		if prev != "" {
			body["previous_response_id"] = prev
		}
		var r protocol.Response
		if turn == 1 {
			body["stream"] = true
			status, raw := callJSON(t, http.MethodPost, base+protocol.PathResponses, body)
			events := namedEvents(t, raw)
			var e protocol.ResponseStateEvent
			if status != http.StatusOK || json.Unmarshal(events[len(events)-1].data, &e) != nil {
				t.Fatalf("turn %d: %d %s", turn, status, raw)
			}
			r = e.Response
		} else {
			r = respond(t, base, "", body)
		}
		if got := r.Output[0].Text(); got != want || !r.Store || deref(r.PreviousResponseID) != prev {
			t.Fatalf("turn %d: %q (store %v, previous %v), chat %q", turn, got, r.Store, r.PreviousResponseID, want)
		}
		chat = append(chat, map[string]any{"role": "assistant", "content": want})
		prev, last = r.ID, r
	}

	status, raw := callJSON(t, http.MethodGet, base+protocol.PathResponses+"/"+prev, nil)
	var got protocol.Response
	if status != http.StatusOK || json.Unmarshal(raw, &got) != nil || got.ID != last.ID || got.Output[0].Text() != last.Output[0].Text() ||
		*got.Usage != *last.Usage {
		t.Fatalf("GET: %d %s", status, raw)
	}
	status, raw = callJSON(t, http.MethodGet, base+protocol.PathResponses+"/"+prev+"/input_items?order=asc", nil)
	var items protocol.ResponseItemList
	if status != http.StatusOK || json.Unmarshal(raw, &items) != nil || len(items.Data) != 1 || items.Data[0].Role != "user" ||
		items.Data[0].Text() != "and the bird?" || items.Data[0].Content[0].Type != "input_text" || deref(items.FirstID) != items.Data[0].ID || items.HasMore {
		t.Fatalf("input_items: %d %s", status, raw)
	}
	status, raw = callJSON(t, http.MethodDelete, base+protocol.PathResponses+"/"+prev, nil)
	var deleted protocol.ResponseDeleted
	if status != http.StatusOK || json.Unmarshal(raw, &deleted) != nil || deleted != (protocol.ResponseDeleted{ID: prev, Object: "response", Deleted: true}) {
		t.Fatalf("DELETE: %d %s", status, raw)
	}
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/" + prev, nil},
		{http.MethodGet, "/" + prev + "/input_items", nil},
		{http.MethodDelete, "/" + prev, nil},
		{http.MethodPost, "", map[string]any{"input": "more", "previous_response_id": prev, "max_output_tokens": 4}},
	} {
		if status, raw := callJSON(t, tc.method, base+protocol.PathResponses+tc.path, tc.body); status != http.StatusNotFound || !strings.Contains(string(raw), prev) {
			t.Errorf("%s %s after DELETE: %d %s", tc.method, tc.path, status, raw)
		}
	}
}

// A stored response is its tenant's only: another tenant gets the 404 of
// an unknown id, to read, list, delete or continue it, and its delete
// leaves it; store: false keeps nothing; a record over the bound is
// refused before anything is generated.
func TestResponsesTenantIsolation(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole}, nil)
	base := storingFront(t, c, 0)
	r := respond(t, base, "alice", map[string]any{"input": "the cat sat on", "max_output_tokens": 4, "temperature": 0})
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/" + r.ID, nil},
		{http.MethodGet, "/" + r.ID + "/input_items", nil},
		{http.MethodDelete, "/" + r.ID, nil},
		{http.MethodPost, "", map[string]any{"input": "more", "previous_response_id": r.ID, "max_output_tokens": 4}},
	} {
		status, raw := callJSON(t, tc.method, base+protocol.PathResponses+tc.path, tc.body, "X-Tenant", "bob")
		unknown, rawUnknown := callJSON(t, tc.method, base+protocol.PathResponses+strings.Replace(tc.path, r.ID, "resp_unknown", 1),
			map[string]any{"input": "more", "previous_response_id": "resp_unknown", "max_output_tokens": 4}, "X-Tenant", "bob")
		if status != http.StatusNotFound || unknown != status ||
			strings.ReplaceAll(string(raw), r.ID, "resp_unknown") != string(rawUnknown) {
			t.Errorf("bob %s %s: %d %s; an unknown id: %d %s", tc.method, tc.path, status, raw, unknown, rawUnknown)
		}
	}
	if status, raw := callJSON(t, http.MethodGet, base+protocol.PathResponses+"/"+r.ID, nil, "X-Tenant", "alice"); status != http.StatusOK {
		t.Fatalf("alice's own, after bob's DELETE: %d %s", status, raw)
	}

	unstored := respond(t, base, "alice", map[string]any{"input": "hi", "max_output_tokens": 2, "store": false})
	if status, _ := callJSON(t, http.MethodGet, base+protocol.PathResponses+"/"+unstored.ID, nil, "X-Tenant", "alice"); unstored.Store || status != http.StatusNotFound {
		t.Errorf("store false: %v, GET %d", unstored.Store, status)
	}

	small := storingFront(t, c, 200)
	status, raw := callJSON(t, http.MethodPost, small+protocol.PathResponses, map[string]any{"input": strings.Repeat("cat ", 60), "max_output_tokens": 2})
	var e protocol.ErrorBody
	if status != http.StatusBadRequest || json.Unmarshal(raw, &e) != nil || deref(e.Error.Param) != "store" {
		t.Errorf("over the bound: %d %s", status, raw)
	}
}

// downStore is a memStore that fails every call with err while err is
// set.
type downStore struct {
	memStore
	mu  sync.Mutex
	err error
}

func (s *downStore) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *downStore) failing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *downStore) Put(ctx context.Context, tenant, id string, record []byte) error {
	if err := s.failing(); err != nil {
		return err
	}
	return s.memStore.Put(ctx, tenant, id, record)
}

func (s *downStore) Get(ctx context.Context, tenant, id string) ([]byte, bool, error) {
	if err := s.failing(); err != nil {
		return nil, false, err
	}
	return s.memStore.Get(ctx, tenant, id)
}

func (s *downStore) Delete(ctx context.Context, tenant, id string) (bool, error) {
	if err := s.failing(); err != nil {
		return false, err
	}
	return s.memStore.Delete(ctx, tenant, id)
}

// A store out of reach (its error wraps responsestore.ErrUnavailable): reading,
// listing, deleting or continuing a response is a 503 with a
// Retry-After, never the 404 of a response that is gone; storing one is
// a 500, or response.failed once a stream began. Any other failure of
// the store is a 500.
func TestResponsesStoreUnavailable(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole}, nil)
	store := &downStore{}
	m := NewModels([]*Router{c.r}, 0)
	m.StoreResponses(store, 0)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	r := respond(t, srv.URL, "", map[string]any{"input": "the cat sat on", "max_output_tokens": 4, "temperature": 0})

	store.fail(fmt.Errorf("redis: %w (dial tcp: connection refused)", responsestore.ErrUnavailable))
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/" + r.ID, nil},
		{http.MethodGet, "/" + r.ID + "/input_items", nil},
		{http.MethodDelete, "/" + r.ID, nil},
		{http.MethodPost, "", map[string]any{"input": "more", "previous_response_id": r.ID, "max_output_tokens": 4}},
	} {
		b, _ := json.Marshal(tc.body)
		req, _ := http.NewRequest(tc.method, srv.URL+protocol.PathResponses+tc.path, bytes.NewReader(b))
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e protocol.ErrorBody
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			json.Unmarshal(raw, &e) != nil || e.Error.Type != protocol.ErrTypeUnavailable || !strings.Contains(e.Error.Message, "out of reach") {
			t.Errorf("%s %s: %d (Retry-After %q) %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), raw)
		}
	}
	status, raw := callJSON(t, http.MethodPost, srv.URL+protocol.PathResponses, map[string]any{"input": "hi", "max_output_tokens": 2})
	if status != http.StatusInternalServerError || !strings.Contains(string(raw), "storing the response") {
		t.Errorf("store with the store away: %d %s", status, raw)
	}
	status, raw = callJSON(t, http.MethodPost, srv.URL+protocol.PathResponses, map[string]any{"input": "hi", "max_output_tokens": 2, "stream": true})
	events := namedEvents(t, raw)
	if status != http.StatusOK || len(events) == 0 || events[len(events)-1].name != protocol.EventResponseFailed {
		t.Errorf("streamed with the store away: %d %s", status, raw)
	}
	if status, raw := callJSON(t, http.MethodPost, srv.URL+protocol.PathResponses, map[string]any{"input": "hi", "max_output_tokens": 2, "store": false}); status != http.StatusOK {
		t.Errorf("store: false needs no store: %d %s", status, raw)
	}

	store.fail(errors.New("disk I/O error"))
	if status, raw := callJSON(t, http.MethodGet, srv.URL+protocol.PathResponses+"/"+r.ID, nil); status != http.StatusInternalServerError {
		t.Errorf("another failure: %d %s", status, raw)
	}
	store.fail(nil)
	if status, raw := callJSON(t, http.MethodGet, srv.URL+protocol.PathResponses+"/"+r.ID, nil); status != http.StatusOK {
		t.Errorf("the store back: %d %s", status, raw)
	}
}
