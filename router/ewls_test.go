package router

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestEWLSFitsForgetsAndResists checks the latency fit: it recovers a
// linear law from noisy observations, shrugs off rare huge outliers, and
// follows a change of law within a few half-lives of observations, a
// 20-fold one too (an engine that falls behind is not an outlier).
func TestEWLSFitsForgetsAndResists(t *testing.T) {
	e := &ewls{k: 3}
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(1000, 0)
	law := func(a, b, c float64) func(x [3]float64) float64 {
		return func(x [3]float64) float64 { return a + b*x[1] + c*x[2] }
	}
	feed := func(f func([3]float64) float64, n int, outliers bool) {
		for i := range n {
			now = now.Add(20 * time.Millisecond)
			x := [3]float64{1, float64(rng.IntN(2000)), float64(rng.IntN(16))}
			y := f(x) * (1 + 0.05*(rng.Float64()-0.5))
			if outliers && i%25 == 24 {
				y *= 50
			}
			e.observe(now, x, y)
		}
	}
	check := func(f func([3]float64) float64, what string) {
		t.Helper()
		for _, x := range [][3]float64{{1, 100, 1}, {1, 1500, 8}, {1, 500, 15}} {
			got, ok := e.predict(now, x)
			if want := f(x); !ok || math.Abs(got-want) > 0.15*want {
				t.Fatalf("%s: predicted %.4f at %v, want %.4f (±15%%)", what, got, x, want)
			}
		}
	}
	if _, ok := e.predict(now, [3]float64{1, 1, 1}); ok {
		t.Fatal("a fit with no observation predicted")
	}
	fast := law(0.002, 0.00005, 0.001)
	feed(fast, 400, true)
	check(fast, "with 4% outliers")
	slow := law(0.006, 0.0002, 0.003)
	feed(slow, 400, false) // 8 s of observations, 4 half-lives
	check(slow, "8 s after the engine slowed down")
	stalled := law(0.12, 0.004, 0.06) // 20x: far beyond what a cold start's outlier is
	feed(stalled, 400, false)
	check(stalled, "8 s after the engine fell 20x behind")
	if _, ok := e.predict(now.Add(20*ewlsHalfLife), [3]float64{1, 1, 1}); ok {
		t.Fatal("a fit with no observation for 20 half-lives still predicts")
	}
}
