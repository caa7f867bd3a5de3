package model

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// layer holds the weights of one decoder layer; matrices are row-major
// with one row per output.
type layer struct {
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    []float32 // Dim x Dim
	w1, w3            []float32 // FFN x Dim (gate, up)
	w2                []float32 // Dim x FFN (down)
}

// initWeights draws all weights from a PRNG seeded by name.
func (m *Model) initWeights(name string) {
	h := fnv.New64a()
	h.Write([]byte(name))
	r := rand.New(rand.NewPCG(h.Sum64(), 0x6d6c632d62756c74))
	c := m.cfg
	m.embed = normal(r, c.Vocab*c.Dim, 0.3)
	m.layers = make([]layer, c.Layers)
	for i := range m.layers {
		m.layers[i] = layer{
			attnNorm: around1(r, c.Dim),
			ffnNorm:  around1(r, c.Dim),
			wq:       matrix(r, c.Dim, c.Dim),
			wk:       matrix(r, c.Dim, c.Dim),
			wv:       matrix(r, c.Dim, c.Dim),
			wo:       matrix(r, c.Dim, c.Dim),
			w1:       matrix(r, c.FFN, c.Dim),
			w3:       matrix(r, c.FFN, c.Dim),
			w2:       matrix(r, c.Dim, c.FFN),
		}
	}
	m.finalNorm = around1(r, c.Dim)
	m.lmHead = normal(r, c.Vocab*c.Dim, 0.3)
}

// normal returns n values drawn from N(0, std²).
func normal(r *rand.Rand, n int, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * std)
	}
	return v
}

// matrix returns an out x in matrix scaled so outputs keep unit variance.
func matrix(r *rand.Rand, out, in int) []float32 {
	return normal(r, out*in, 1/math.Sqrt(float64(in)))
}

// around1 returns norm weights close to 1.
func around1(r *rand.Rand, n int) []float32 {
	v := normal(r, n, 0.1)
	for i := range v {
		v[i]++
	}
	return v
}
