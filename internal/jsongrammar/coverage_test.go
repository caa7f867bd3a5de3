package jsongrammar

import (
	"math/rand/v2"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schemacorpus"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
)

// coverageGoal is the share of real-world schemas served.
const coverageGoal = 0.95

// TestCoverageRealWorld: at least coverageGoal of the corpus's
// real-world schemas are served, and every text generated under one
// validates against it, formats asserted, by an independent validator.
func TestCoverageRealWorld(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	corpus := schemacorpus.RealWorld()
	served := 0
	for _, s := range corpus {
		texts, err := checkBounds(t, s.Text, 5, rng)
		if err != nil {
			t.Logf("refused %s: %v", s.Name, err)
			continue
		}
		served++
		v := schematest.CompileFormats(t, s.Text)
		for _, text := range texts {
			schematest.Validate(t, v, s.Name, text)
		}
	}
	share := float64(served) / float64(len(corpus))
	t.Logf("served %d of %d real-world schemas (%.1f%%)", served, len(corpus), 100*share)
	if share < coverageGoal {
		t.Errorf("served %.1f%% of the real-world schemas, under %.0f%%", 100*share, 100*coverageGoal)
	}
}

// TestCoverageTestSuite: a Test Suite schema the grammar serves admits
// none of the instances the suite says are invalid, and the texts it
// generates validate.
func TestCoverageTestSuite(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	corpus := schemacorpus.TestSuite()
	served := 0
	for _, s := range corpus {
		g, err := CompileSchema([]byte(s.Text), Bounds{})
		if err != nil {
			continue
		}
		served++
		a := NewAutomaton(g, nil)
		for _, bad := range s.Invalid {
			st, ok := a.Feed(a.Start(), bad), true
			if g.NeedsDistinct() {
				st, ok = (&Distinct{}).Feed(a, a.Start(), bad)
			}
			if ok && st.CanEnd() {
				t.Errorf("%s: %s admits %s, which the suite says is invalid", s.Name, s.Text, bad)
			}
		}
		texts, err := checkBounds(t, s.Text, 3, rng)
		if err != nil {
			t.Errorf("%s: served unbounded, refused under the built-in bounds: %v", s.Name, err)
			continue
		}
		v, err := schematest.TryCompileFormats(s.Text)
		if err != nil {
			continue // a reference the validator cannot follow either
		}
		for _, text := range texts {
			schematest.Validate(t, v, s.Name, text)
		}
	}
	t.Logf("served %d of %d Test Suite schemas", served, len(corpus))
}
