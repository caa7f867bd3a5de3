package router

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ewls is a linear fit y ≈ θ·x, x[0] = 1, by exponentially weighted least
// squares: every observation's weight decays with its age (half-life
// ewlsHalfLife), so the fit follows an engine that slows down within
// seconds and forgets what it was. It keeps only the decayed sums of
// xxᵀ and xy (a few floats, whatever the traffic), and is robust to
// outliers: an observation far off the fit (a stall, a GC pause) weighs
// less, as in Huber's regression. Observations take a mutex; predictions
// read the last fit through an atomic pointer, without a lock.
type ewls struct {
	k int // features, the intercept's included: at most 3

	mu   sync.Mutex
	last time.Time
	w    float64 // the weights' sum
	xx   [3][3]float64
	xy   [3]float64
	sq   float64 // the residuals' sizes, clipped, for the outlier scale

	fit atomic.Pointer[ewlsFit]
}

// ewlsFit is a fit as predictions read it.
type ewlsFit struct {
	theta [3]float64
	w     float64 // the weights' sum when it was made
	at    time.Time
}

// The fit's constants.
const (
	// ewlsHalfLife is how fast old observations fade: after a few
	// half-lives a changed engine's old behaviour no longer counts.
	ewlsHalfLife = 2 * time.Second
	// ewlsMinWeight is the decayed weight a fit needs to predict: a few
	// recent observations. An engine not observed for some half-lives
	// becomes unknown again, and so is tried afresh.
	ewlsMinWeight = 2.0
	// ewlsRobustWeight is the weight a fit needs before it calls an
	// observation an outlier: a fit of a few points is no judge.
	ewlsRobustWeight = 8.0
	// ewlsHuber is how many residual scales off an observation may be
	// before it weighs less.
	ewlsHuber = 3.0
	// ewlsWild is how many times the mean an observation may be before
	// it weighs less, whatever the fit.
	ewlsWild = 8.0
	// ewlsRidge keeps the slopes defined while a feature has not varied.
	ewlsRidge = 1e-3
)

// decay is the weight left to what was observed dt ago.
func decay(dt time.Duration) float64 {
	if dt <= 0 {
		return 1
	}
	return math.Exp2(-float64(dt) / float64(ewlsHalfLife))
}

// observe adds the observation (x, y) made at now, and refits. It
// returns what the fit before it predicted, or -1 when it could not.
func (e *ewls) observe(now time.Time, x [3]float64, y float64) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := decay(now.Sub(e.last))
	if now.After(e.last) {
		e.last = now
	}
	e.w *= d
	e.sq *= d
	for i := range e.k {
		e.xy[i] *= d
		for j := range e.k {
			e.xx[i][j] *= d
		}
	}
	pred, wt := -1.0, 1.0
	// Before the fit can judge, a value far above the mean is an outlier
	// (the first calls of an engine may meet a cold cache, a GC). Only
	// then: an engine that falls behind its queue answers ever later,
	// which the fit must follow, not discount.
	if mean := e.xy[0] / max(e.w, 1e-9); e.w >= 1 && e.w < ewlsRobustWeight && y > ewlsWild*mean {
		wt = ewlsWild * mean / y
	}
	if f := e.fit.Load(); f != nil && e.w >= ewlsMinWeight {
		pred = f.eval(x, e.k)
	}
	if pred >= 0 && e.w >= ewlsRobustWeight {
		// The scale floor keeps a fit of near-identical observations from
		// calling every new one an outlier.
		scale := max(1.25*e.sq/e.w, 0.1*math.Abs(pred), 1e-4)
		r := math.Abs(y - pred)
		if r > ewlsHuber*scale {
			wt = min(wt, ewlsHuber*scale/r)
		}
		// The scale grows by the residual clipped as the weight is: a
		// lasting change raises it step by step, one outlier barely.
		e.sq += min(r, ewlsHuber*scale)
	}
	e.w += wt
	for i := range e.k {
		e.xy[i] += wt * x[i] * y
		for j := range e.k {
			e.xx[i][j] += wt * x[i] * x[j]
		}
	}
	e.fit.Store(&ewlsFit{theta: e.solve(), w: e.w, at: now})
	return pred
}

// solve returns θ of the normal equations, the slopes kept at 0 or more
// (a longer prompt or a bigger batch never makes an engine faster): a
// slope that comes out negative is dropped and the rest solved again.
func (e *ewls) solve() [3]float64 {
	use := [3]bool{true, true, e.k > 2}
	for {
		theta := e.solveWith(use)
		dropped := false
		for i := 1; i < e.k; i++ {
			if use[i] && theta[i] < 0 {
				use[i], dropped = false, true
			}
		}
		if !dropped {
			return theta
		}
	}
}

// solveWith solves the normal equations of the features in use, ridge
// regularised, by Gaussian elimination with partial pivoting.
func (e *ewls) solveWith(use [3]bool) [3]float64 {
	var idx []int
	for i := range e.k {
		if use[i] {
			idx = append(idx, i)
		}
	}
	n := len(idx)
	var a [3][4]float64
	for r, i := range idx {
		for c, j := range idx {
			a[r][c] = e.xx[i][j]
		}
		if i > 0 {
			a[r][r] += ewlsRidge * (1 + e.xx[i][i])
		}
		a[r][n] = e.xy[i]
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		a[col], a[p] = a[p], a[col]
		if math.Abs(a[col][col]) < 1e-12 {
			continue
		}
		for r := range n {
			if r == col {
				continue
			}
			f := a[r][col] / a[col][col]
			for c := col; c <= n; c++ {
				a[r][c] -= f * a[col][c]
			}
		}
	}
	var theta [3]float64
	for r, i := range idx {
		if a[r][r] != 0 {
			theta[i] = a[r][n] / a[r][r]
		}
	}
	return theta
}

// predict returns the fit's y at x, or false while there is no fit with
// enough recent weight behind it.
func (e *ewls) predict(now time.Time, x [3]float64) (float64, bool) {
	f := e.fit.Load()
	if f == nil || f.w*decay(now.Sub(f.at)) < ewlsMinWeight {
		return 0, false
	}
	return max(f.eval(x, e.k), 0), true
}

func (f *ewlsFit) eval(x [3]float64, k int) float64 {
	y := 0.0
	for i := range k {
		y += f.theta[i] * x[i]
	}
	return y
}
