package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// measureRows runs every row for every party, cfg.rounds times,
// interleaved: in each round, each row, each party in turn (the order
// rotating with the round), so that a change of machine load touches
// every party alike. Each party's Caddy is sampled around its own
// segments only.
func measureRows(ctx context.Context, cfg *config, parties []*party, engines []string, load *loadWatch) ([]rowResult, error) {
	rows := cfg.rows()
	tallies := make([]map[string]*tally, len(rows))
	for i := range tallies {
		tallies[i] = map[string]*tally{}
		for _, p := range parties {
			tallies[i][p.key] = &tally{}
		}
	}
	for round := range cfg.rounds {
		for ri, r := range rows {
			reqs := bodies(cfg.seed, r, round, cfg.requests(r), cfg.promptLen)
			if round == 0 {
				if err := warm(ctx, r, parties, reqs); err != nil {
					return nil, err
				}
			}
			var line []string
			for k := range parties {
				p := parties[(k+round)%len(parties)]
				samples, wall, err := p.measureSegment(ctx, r, reqs, engines, tallies[ri][p.key])
				if err != nil {
					return nil, err
				}
				line = append(line, fmt.Sprintf("%s %.0f/s", p.key, float64(len(samples))/wall.Seconds()))
			}
			load.sample()
			progressf("round %d/%d %s: %s (load %s)", round+1, cfg.rounds, r.name(), strings.Join(line, ", "), loadAverage())
		}
	}
	out := make([]rowResult, len(rows))
	for ri, r := range rows {
		out[ri] = rowResult{row: r, parties: parties, figs: map[string]figures{}}
		for _, p := range parties {
			t := tallies[ri][p.key]
			out[ri].figs[p.key] = t.figures()
			if t.firstErr != nil {
				progressf("%s %s: %d errors, the first: %v", r.name(), p.key, t.errors, t.firstErr)
			}
		}
	}
	return out, nil
}

// window is what a party's segment is measured against: its Caddy's
// counters, the router's overhead histogram and the engines' decoded
// tokens.
type window struct {
	caddy   caddySample
	own     histogram
	decoded []float64
}

// measureSegment runs one segment of the row through p and adds it to t,
// with what p's Caddy and the engines counted around it. The overhead
// histogram is read outside the window of the other counters: its
// exposition allocates in Caddy.
func (p *party) measureSegment(ctx context.Context, r row, reqs [][]byte, engines []string, t *tally) ([]sample, time.Duration, error) {
	var before, after window
	var err error
	if before.own, err = p.overhead(ctx); err == nil {
		err = p.sampleWindow(ctx, engines, &before)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", p.key, err)
	}
	samples, wall := p.segment(ctx, r, reqs)
	if err = p.sampleWindow(ctx, engines, &after); err == nil {
		after.own, err = p.overhead(ctx)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", p.key, err)
	}
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	t.add(samples, wall)
	t.addDecoded(before.decoded, after.decoded)
	if p.caddy != nil {
		t.addCaddy(before.caddy, after.caddy)
		t.own.grow(before.own, after.own)
	}
	return samples, wall, nil
}

// sampleWindow reads p's Caddy's counters and the engines' decoded tokens
// into w.
func (p *party) sampleWindow(ctx context.Context, engines []string, w *window) error {
	var err error
	if w.caddy, err = p.measure(ctx); err != nil {
		return err
	}
	w.decoded, err = decodedTokens(ctx, engines)
	return err
}

// warm sends one request per client of the row through every party before
// it is measured, so each has its connections open and its code paths
// hot. A party that answers none of them stops the run: its figures would
// mean nothing.
func warm(ctx context.Context, r row, parties []*party, reqs [][]byte) error {
	n := min(r.conc, len(reqs))
	for _, p := range parties {
		samples, _ := p.segment(ctx, r, reqs[:n])
		failed := 0
		for _, s := range samples {
			if s.err != nil {
				failed++
				if failed == n {
					return fmt.Errorf("%s answers nothing at %s: %w", p.label, r.name(), s.err)
				}
			}
		}
	}
	return ctx.Err()
}

// progressf reports progress on stderr; the tables go to stdout.
func progressf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// loadWatch keeps the machine's load average over the run, for the tables'
// captions: the machine is shared, and its load moves the figures.
type loadWatch struct {
	start, end, peak string
	peakV            float64
}

func (l *loadWatch) sample() {
	v := loadAverage()
	if l.start == "" {
		l.start = v
	}
	l.end = v
	var f float64
	if _, err := fmt.Sscan(v, &f); err == nil && f >= l.peakV {
		l.peak, l.peakV = v, f
	}
}

func (l *loadWatch) String() string {
	return fmt.Sprintf("load average %s at the start, %s at the end, %s at most", l.start, l.end, l.peak)
}
