package model

import "math"

// attend computes, for each head, the softmax-weighted sum of the values
// of positions 0..len(slots)-1, in position order, into out.
func (m *Model) attend(kv KV, l int, slots []int, q, out, scores []float32) {
	hd := m.cfg.HeadDim()
	scale := float32(1 / math.Sqrt(float64(hd)))
	keys, values := kv.K[l], kv.V[l]
	d := m.cfg.Dim
	clear(out)
	for h := 0; h < m.cfg.Heads; h++ {
		qh := q[h*hd : (h+1)*hd]
		lo := h * hd
		maxScore := float32(math.Inf(-1))
		for j, s := range slots {
			sc := dot(qh, keys[s*d+lo:s*d+lo+hd]) * scale
			scores[j] = sc
			maxScore = max(maxScore, sc)
		}
		var sum float32
		for j := range slots {
			e := float32(math.Exp(float64(scores[j] - maxScore)))
			scores[j] = e
			sum += e
		}
		oh := out[lo : lo+hd]
		for j, s := range slots {
			axpy(oh, scores[j]/sum, values[s*d+lo:s*d+lo+hd])
		}
	}
}
