package router

import (
	"slices"
	"sync"
	"testing"
)

// prefixRecorder keeps the events a replica shares.
type prefixRecorder struct {
	mu     sync.Mutex
	models []string
	events []PrefixEvent
}

func (s *prefixRecorder) PrefixLearned(model string, ev PrefixEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append(s.models, model)
	s.events = append(s.events, ev)
}

// indexState is what an index holds: its pages (held or pending), most
// recent first, and its limit.
func indexState(p *prefixIndex) (pages []uint64, held []bool, limit int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for e := p.lru.Front(); e != nil; e = e.Next() {
		pg := e.Value.(*indexedPage)
		pages = append(pages, pg.hash)
		held = append(held, pg.held)
	}
	return pages, held, p.limit
}

// What a router's prefix tracker does to its engine's index goes to the
// sink as events; replayed on another replica's index of the same engine
// (here: the same index, emptied), they leave it as the router left its
// own.
func TestPrefixEventsReplayTheTrackersSteps(t *testing.T) {
	sink := &prefixRecorder{}
	s := startCore(t, 1, Config{Mode: ModeWhole}, PrefixAware{})
	remove := s.r.live.SetPrefixSink(sink)
	defer remove()
	prompt := seq(5, 4*kvPageTokens+3)
	s.complete(s.base, greedy(prompt, 4))
	s.complete(s.base, greedy(append(seq(5, 2*kvPageTokens), seq(900, 40)...), 4))
	remove()

	sink.mu.Lock()
	events, models := slices.Clone(sink.events), slices.Clone(sink.models)
	sink.mu.Unlock()
	kinds := []PrefixEventKind{}
	for i, ev := range events {
		kinds = append(kinds, ev.Kind)
		if models[i] != "tiny" || ev.Engine != s.fleet.upstreams[0].addr {
			t.Fatalf("event %d of model %q, engine %q", i, models[i], ev.Engine)
		}
	}
	if !slices.Equal(kinds, []PrefixEventKind{PrefixRouted, PrefixFinished, PrefixRouted, PrefixFinished}) {
		t.Fatalf("events %v, want routed and finished for each request", kinds)
	}
	u := s.fleet.upstreams[0]
	wantPages, wantHeld, wantLimit := indexState(&u.prefixes)
	if len(wantPages) != 4+2 { // the second prompt shares two pages of the first
		t.Fatalf("the index holds %d pages", len(wantPages))
	}

	// Another replica: the same engine's index, as it was before.
	u.prefixes.mu.Lock()
	u.prefixes.lru.Init()
	u.prefixes.pages, u.prefixes.limit = nil, 0
	u.prefixes.mu.Unlock()
	for _, ev := range events {
		u.ApplyPrefixEvent(ev)
	}
	pages, held, limit := indexState(&u.prefixes)
	if !slices.Equal(pages, wantPages) || !slices.Equal(held, wantHeld) || limit != wantLimit {
		t.Fatalf("replayed index:\n%x %v %d\nthe router's:\n%x %v %d", pages, held, limit, wantPages, wantHeld, wantLimit)
	}
}

// A router whose policy keeps no index shares nothing.
func TestNoPrefixEventsWithoutTheIndex(t *testing.T) {
	sink := &prefixRecorder{}
	s := startCore(t, 1, Config{Mode: ModeWhole}, LeastLoaded{})
	defer s.r.live.SetPrefixSink(sink)()
	s.complete(s.base, greedy(seq(5, 40), 4))
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.events) != 0 {
		t.Fatalf("least_loaded shared %d prefix events", len(sink.events))
	}
}
