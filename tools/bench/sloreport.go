package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"
)

// sloStep is one policy's requests at one rate.
type sloStep struct {
	policy  string
	rate    float64
	samples []*sloSample
}

// attainment is the share of the step's requests (of class, "" for all)
// that met their targets, and how many there were.
func (s *sloStep) attainment(class string) (float64, int) {
	n, met := 0, 0
	for _, x := range s.samples {
		if class != "" && x.class.name != class {
			continue
		}
		n++
		if x.met() {
			met++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(met) / float64(n), n
}

func (s *sloStep) errors() int {
	n := 0
	for _, x := range s.samples {
		if x.err != nil {
			n++
		}
	}
	return n
}

func (s *sloStep) summary() string {
	a, n := s.attainment("")
	return fmt.Sprintf("%s at %.1f req/s: %d requests, %.0f%% met their targets, %d failed", s.policy, s.rate, n, 100*a, s.errors())
}

// goodput is the highest rate at which policy's steps met sloGoal (the
// issue's definition: a step below it that missed, by noise or not, does
// not lower it); 0 when none did.
func goodput(steps []sloStep, policy string) float64 {
	g := 0.0
	for _, s := range steps {
		if a, n := s.attainment(""); s.policy == policy && n > 0 && a >= sloGoal {
			g = max(g, s.rate)
		}
	}
	return g
}

// writeSLO prints the goodput run's tables.
func writeSLO(w io.Writer, args []string, cfg *config, steps []sloStep, equal []sloEqual, load *loadWatch, took time.Duration) {
	fmt.Fprintf(w, "### Goodput benchmark (latency targets), %s\n\n", time.Now().Format("2006-01-02 15:04"))
	fmt.Fprintf(w, "`%s` (%v, commit %s): %d CPUs, %s; the bench, the two Caddys and the three engines share them.\n\n",
		commandLine(args), took.Round(time.Second), commit(), runtime.NumCPU(), load)
	fmt.Fprintf(w, "Three built-in engines, %v per prompt token and %v per decode step, the third %dx slower; "+
		"the mix: ", fastPrefill, fastDecode, slowFactor)
	for i, c := range sloMix {
		if i > 0 {
			fmt.Fprint(w, "; ")
		}
		fmt.Fprintf(w, "%.0f%% %s (%d prompt tokens, %d generated, TTFT ≤ %v, TPOT ≤ %v)", 100*c.share, c.name, c.promptLen, c.maxTokens, c.ttft, c.tpot)
	}
	fmt.Fprintf(w, ". Poisson arrivals, %v per step; a request meets its targets when it is answered within both.\n\n", cfg.sloStep)
	fmt.Fprintln(w, "| rate (req/s) | policy | requests | met | chat met | long met | failed |")
	fmt.Fprintln(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range steps {
		a, n := s.attainment("")
		ac, _ := s.attainment("chat")
		al, _ := s.attainment("long")
		fmt.Fprintf(w, "| %.1f | %s | %d | %.0f%% | %.0f%% | %.0f%% | %d |\n", s.rate, s.policy, n, 100*a, 100*ac, 100*al, s.errors())
	}
	gs, gl := goodput(steps, sloPolicies[0]), goodput(steps, sloPolicies[1])
	fmt.Fprintf(w, "\nGoodput (the highest rate with ≥ %.0f%% meeting their targets): %s %.1f req/s, %s %.1f req/s: %s (goal ≥ %.1fx).\n",
		100*sloGoal, sloPolicies[0], gs, sloPolicies[1], gl, ratioText(gs, gl), goalGoodput)
	fmt.Fprintf(w, "\nEqual engines, no targets, %d streams for %v in %d turns, interleaved:\n\n| policy | requests | req/s | TTFT p50 | failed |\n| --- | ---: | ---: | ---: | ---: |\n", sloEqualConc, cfg.sloStep, sloEqualRounds)
	for _, e := range equal {
		fmt.Fprintf(w, "| %s | %d | %.1f | %v | %d |\n", e.policy, e.n, e.rps, e.ttftP50.Round(100*time.Microsecond), e.errs)
	}
	if len(equal) == 2 && equal[1].rps > 0 {
		fmt.Fprintf(w, "\nThroughput %s / %s: %.2f (goal ≥ %.2f).\n", equal[0].policy, equal[1].policy, equal[0].rps/equal[1].rps, goalThroughput)
	}
}

func ratioText(a, b float64) string {
	switch {
	case b > 0:
		return fmt.Sprintf("%.2fx", a/b)
	case a > 0:
		return "∞ (least_loaded met the goal at no step)"
	}
	return "neither met the goal"
}

// sloVerdict fails a checked run whose goals were missed.
func sloVerdict(steps []sloStep, equal []sloEqual, check bool) error {
	gs, gl := goodput(steps, sloPolicies[0]), goodput(steps, sloPolicies[1])
	var errs []error
	if !(gs > 0 && (gl == 0 || gs/gl >= goalGoodput)) {
		errs = append(errs, fmt.Errorf("goodput %s %.1f, %s %.1f: want ≥ %.1fx", sloPolicies[0], gs, sloPolicies[1], gl, goalGoodput))
	}
	if len(equal) == 2 && !(equal[1].rps > 0 && equal[0].rps/equal[1].rps >= goalThroughput) {
		errs = append(errs, fmt.Errorf("equal fleet throughput %.1f vs %.1f req/s: want ≥ %.2f", equal[0].rps, equal[1].rps, goalThroughput))
	}
	for _, s := range steps {
		if n := s.errors(); n > 0 {
			errs = append(errs, fmt.Errorf("%s at %.1f req/s: %d requests failed", s.policy, s.rate, n))
		}
	}
	if len(errs) == 0 || !check {
		return nil
	}
	return errors.Join(errs...)
}
