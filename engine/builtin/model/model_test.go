package model

import (
	"math/rand/v2"
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

// TestAttend16IsAttendAny holds the unrolled attention to the general one,
// bit for bit: every text the engine has ever generated depends on it.
func TestAttend16IsAttendAny(t *testing.T) {
	c := DefaultConfig(300, 1)
	m, err := New("tiny", c)
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim() != 16 {
		t.Fatalf("head width %d: the test needs the built-in shape", c.HeadDim())
	}
	const n = 700
	kv := newKV(c, n)
	r := rand.New(rand.NewPCG(1, 2))
	for l := range kv.K {
		for i := range kv.K[l] {
			kv.K[l][i] = float32(r.NormFloat64())
			kv.V[l][i] = float32(r.NormFloat64())
		}
	}
	slots := make([]int, n)
	for i := range slots {
		slots[i] = (i * 211) % n
	}
	q := make([]float32, c.Dim)
	for i := range q {
		q[i] = float32(r.NormFloat64()) * 3
	}
	for _, k := range []int{1, 2, 17, n} {
		a, b := make([]float32, c.Dim), make([]float32, c.Dim)
		m.attendAny(kv, 1, slots[:k], q, a, make([]float32, c.Heads*k))
		m.attend16(kv, 1, slots[:k], q, b, make([]float32, c.Heads*k))
		if !slices.Equal(a, b) {
			t.Fatalf("%d positions: attend16 %v, attendAny %v", k, b[:4], a[:4])
		}
	}
}

func BenchmarkForwardDeep(b *testing.B) {
	c := DefaultConfig(1300, 1)
	m, _ := New("tiny", c)
	const n = 4096
	kv := newKV(c, n)
	slots := make([]int, n)
	for i := range slots {
		slots[i] = i
	}
	s := m.NewScratch()
	for i := range n - 1 {
		m.Forward(kv, slots[:i+1], i%c.Vocab, s, nil)
	}
	for b.Loop() {
		m.Forward(kv, slots, 5, s, nil)
	}
}
