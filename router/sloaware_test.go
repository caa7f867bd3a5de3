package router

import (
	"testing"
	"time"
)

// TestSLOAwareChooses checks slo_aware's choice on made-up predictions:
// least_loaded's without targets; the slowest engine that meets the
// targets safely; the least loaded of engines alike; the most headroom
// when none is safe; an idle engine nobody can judge, to probe it.
func TestSLOAwareChooses(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	cand := func(inFlight int, ttft, tpot, idle float64) Candidate {
		return Candidate{InFlight: inFlight, TTFT: ms(ttft), TPOT: ms(tpot), IdleTTFT: ms(idle)}
	}
	chat := Targets{TTFT: ms(300), TPOT: ms(50)}
	long := Targets{TTFT: ms(3000), TPOT: ms(300)}
	cases := []struct {
		name    string
		targets Targets
		cands   []Candidate
		want    int
	}{
		{"no targets: least loaded", Targets{}, []Candidate{cand(3, 10, 10, 10), cand(1, 900, 90, 900), cand(2, 10, 10, 10)}, 1},
		{"chat: the fast engines, the less loaded", chat, []Candidate{cand(0, 200, 48, 180), cand(4, 60, 15, 20), cand(2, 50, 14, 20)}, 2},
		{"long: the slow engine it still suits", long, []Candidate{cand(0, 100, 20, 80), cand(0, 90, 20, 80), cand(3, 900, 120, 320)}, 2},
		{"long: the slow engine full, a fast one", long, []Candidate{cand(1, 100, 20, 80), cand(9, 2800, 250, 320)}, 0},
		{"none safe: the most headroom", chat, []Candidate{cand(1, 900, 40, 20), cand(1, 400, 40, 20), cand(0, 2000, 200, 80)}, 1},
		{"an idle engine without a model: a probe", chat, []Candidate{cand(0, 60, 15, 20), {}}, 1},
		{"a busy one without: no probe", chat, []Candidate{cand(0, 60, 15, 20), {InFlight: 2}}, 0},
		{"no model at all: least loaded", chat, []Candidate{{InFlight: 2}, {InFlight: 1}}, 1},
	}
	for _, c := range cases {
		req := &Request{Targets: c.targets}
		if got := (SLOAware{}).Choose(req, c.cands); got != c.want {
			t.Errorf("%s: chose %d, want %d", c.name, got, c.want)
		}
		if !c.targets.Set() {
			if ll := (LeastLoaded{}).Choose(req, c.cands); ll != c.want {
				t.Errorf("%s: least_loaded chose %d", c.name, ll)
			}
		}
	}
}
