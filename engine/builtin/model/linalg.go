package model

import "math"

// dot returns the dot product of a and b, summed in a fixed order. It is
// the innermost loop of the model, so the race detector skips it: its
// callers pass memory only the scheduler goroutine touches.
//
//go:norace
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// matvec sets out = W x for a row-major W with len(out) rows.
func matvec(out, w, x []float32) {
	n := len(x)
	for i := range out {
		out[i] = dot(x, w[i*n:(i+1)*n])
	}
}

// rmsnorm sets out = x / rms(x) * weight.
func rmsnorm(out, x, weight []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	inv := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	for i, v := range x {
		out[i] = v * inv * weight[i]
	}
}

// silu is x * sigmoid(x).
func silu(x float32) float32 {
	return x / (1 + float32(math.Exp(float64(-x))))
}

// axpy adds a*x to y, element by element. Like dot, it is an inner loop the
// race detector skips.
//
//go:norace
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// dot16 is dot for 16 elements: the same four partial sums, unrolled.
//
//go:norace
func dot16(a, b *[16]float32) float32 {
	var s0, s1, s2, s3 float32
	s0 += a[0] * b[0]
	s1 += a[1] * b[1]
	s2 += a[2] * b[2]
	s3 += a[3] * b[3]
	s0 += a[4] * b[4]
	s1 += a[5] * b[5]
	s2 += a[6] * b[6]
	s3 += a[7] * b[7]
	s0 += a[8] * b[8]
	s1 += a[9] * b[9]
	s2 += a[10] * b[10]
	s3 += a[11] * b[11]
	s0 += a[12] * b[12]
	s1 += a[13] * b[13]
	s2 += a[14] * b[14]
	s3 += a[15] * b[15]
	return (s0 + s1) + (s2 + s3)
}

// axpy16 is axpy for 16 elements.
//
//go:norace
func axpy16(y *[16]float32, a float32, x *[16]float32) {
	for i := range y {
		y[i] += a * x[i]
	}
}
