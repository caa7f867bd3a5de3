package model

import "math"

// ropeAngles fills cos and sin (HeadDim/2 each) for position pos.
func ropeAngles(pos, headDim int, theta float64, cos, sin []float32) {
	for i := range cos {
		freq := math.Pow(theta, -float64(2*i)/float64(headDim))
		a := float64(pos) * freq
		cos[i] = float32(math.Cos(a))
		sin[i] = float32(math.Sin(a))
	}
}

// applyRope rotates each head of v (pairs i and i+HeadDim/2) in place.
func applyRope(v []float32, heads, headDim int, cos, sin []float32) {
	half := headDim / 2
	for h := range heads {
		x := v[h*headDim : (h+1)*headDim]
		for i := range half {
			a, b := x[i], x[i+half]
			x[i] = a*cos[i] - b*sin[i]
			x[i+half] = a*sin[i] + b*cos[i]
		}
	}
}
