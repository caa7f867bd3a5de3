package model

import (
	"slices"
	"testing"
)

func newKV(c Config, slots int) KV {
	kv := KV{K: make([][]float32, c.Layers), V: make([][]float32, c.Layers)}
	for l := range kv.K {
		kv.K[l] = make([]float32, slots*c.Dim)
		kv.V[l] = make([]float32, slots*c.Dim)
	}
	return kv
}

// run feeds tokens at the given slots and returns the last logits.
func run(m *Model, kv KV, tokens, slots []int) []float32 {
	s := m.NewScratch()
	logits := make([]float32, m.Config().Vocab)
	for i, t := range tokens {
		m.Forward(kv, slots[:i+1], t, s, logits)
	}
	return logits
}

func TestForwardIndependentOfSlots(t *testing.T) {
	c := DefaultConfig(500, 1)
	m, err := New("tiny", c)
	if err != nil {
		t.Fatal(err)
	}
	tokens := []int{5, 17, 300, 42, 42, 7, 99, 123}
	a := run(m, newKV(c, 64), tokens, []int{0, 1, 2, 3, 4, 5, 6, 7})
	b := run(m, newKV(c, 64), tokens, []int{40, 3, 17, 63, 8, 9, 10, 0})
	if !slices.Equal(a, b) {
		t.Fatal("logits depend on where the KV lives")
	}
	m2, _ := New("tiny", c)
	if !slices.Equal(a, run(m2, newKV(c, 64), tokens, []int{0, 1, 2, 3, 4, 5, 6, 7})) {
		t.Fatal("two loads of one model differ")
	}
	other, _ := New("other", c)
	if slices.Equal(a, run(other, newKV(c, 64), tokens, []int{0, 1, 2, 3, 4, 5, 6, 7})) {
		t.Fatal("models of different names agree")
	}
	tokens[0] = 6
	if slices.Equal(a, run(m, newKV(c, 64), tokens, []int{0, 1, 2, 3, 4, 5, 6, 7})) {
		t.Fatal("logits do not depend on the first token")
	}
}

func BenchmarkForward(b *testing.B) {
	c := DefaultConfig(1300, 1)
	m, _ := New("tiny", c)
	kv := newKV(c, 256)
	slots := make([]int, 256)
	for i := range slots {
		slots[i] = i
	}
	s := m.NewScratch()
	logits := make([]float32, c.Vocab)
	for i := 0; b.Loop(); i++ {
		m.Forward(kv, slots[:i%256+1], i%c.Vocab, s, logits)
	}
}
