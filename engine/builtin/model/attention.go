package model

import "math"

// attend computes, for each head, the softmax-weighted sum of the values
// of positions 0..len(slots)-1, in position order, into out. scores holds
// len(slots) per head.
func (m *Model) attend(kv KV, l int, slots []int, q, out, scores []float32) {
	if m.cfg.HeadDim() == 16 {
		m.attend16(kv, l, slots, q, out, scores)
		return
	}
	m.attendAny(kv, l, slots, q, out, scores)
}

// attendAny is attend for any head width.
func (m *Model) attendAny(kv KV, l int, slots []int, q, out, scores []float32) {
	hd := m.cfg.HeadDim()
	scale := float32(1 / math.Sqrt(float64(hd)))
	keys, values := kv.K[l], kv.V[l]
	d := m.cfg.Dim
	clear(out)
	scores = scores[:len(slots)]
	for h := 0; h < m.cfg.Heads; h++ {
		qh := q[h*hd : (h+1)*hd]
		lo := h * hd
		for j, s := range slots {
			scores[j] = dot(qh, keys[s*d+lo:s*d+lo+hd]) * scale
		}
		softmax(scores)
		oh := out[lo : lo+hd]
		for j, s := range slots {
			axpy(oh, scores[j], values[s*d+lo:s*d+lo+hd])
		}
	}
}

// attend16 is attend for heads 16 wide (the built-in shape): the same
// arithmetic in the same order, with the head's loops unrolled and all heads
// of a position read together. scores holds len(slots) per head.
//
//go:norace
func (m *Model) attend16(kv KV, l int, slots []int, q, out, scores []float32) {
	const hd = 16
	scale := float32(1 / math.Sqrt(float64(hd)))
	keys, values := kv.K[l], kv.V[l]
	d, heads, n := m.cfg.Dim, m.cfg.Heads, len(slots)
	clear(out)
	scores = scores[:heads*n]
	for j, s := range slots {
		row := keys[s*d : s*d+d]
		for h := range heads {
			scores[h*n+j] = dot16((*[hd]float32)(q[h*hd:h*hd+hd]), (*[hd]float32)(row[h*hd:h*hd+hd])) * scale
		}
	}
	for h := range heads {
		softmax(scores[h*n : h*n+n])
	}
	for j, s := range slots {
		row := values[s*d : s*d+d]
		for h := range heads {
			axpy16((*[hd]float32)(out[h*hd:h*hd+hd]), scores[h*n+j], (*[hd]float32)(row[h*hd:h*hd+hd]))
		}
	}
}

// softmax replaces scores by their softmax, summed in position order.
func softmax(scores []float32) {
	maxScore := float32(math.Inf(-1))
	for _, sc := range scores {
		maxScore = max(maxScore, sc)
	}
	var sum float32
	for j := range scores {
		e := float32(math.Exp(float64(scores[j] - maxScore)))
		scores[j] = e
		sum += e
	}
	for j := range scores {
		scores[j] /= sum
	}
}
