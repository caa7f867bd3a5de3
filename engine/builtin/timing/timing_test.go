package timing

import (
	"math"
	"testing"
)

// vidurRow is one measurement of Vidur's mlp.csv: the median time of one
// layer's linear and element-wise operators (attn_pre_proj,
// attn_post_proj, mlp_up_proj, mlp_down_proj, input_layernorm,
// attn_rope, post_attention_layernorm, mlp_act, add) on tokens tokens.
type vidurRow struct {
	tokens int
	ms     float64
}

// The shapes Vidur profiled on H100 that stand for Llama-3's there.
func llama2_7b() Model {
	return Model{Name: "Llama-2-7B", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, FFN: 11008, HeadDim: 128, Vocab: 32000}
}

func llama2_70b() Model {
	return Model{Name: "Llama-2-70B", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 28672, HeadDim: 128, Vocab: 32000}
}

// TestProfilesFitVidur holds each profile's layer time to the
// measurements it was fitted on (microsoft/vidur, commit 7d47513,
// data/profiling/compute/<gpu>/<model>/mlp.csv, the median of the
// rows of each token count), within 10% away from the bend between the
// regimes (the fit's worst there is 16-33%, at 256-544 tokens; the
// docs show it).
func TestProfilesFitVidur(t *testing.T) {
	cases := []struct {
		profile string
		shape   Model
		rows    []vidurRow
	}{
		{"a100-llama3-8b", llama3_8b(), []vidurRow{{1, 0.303}, {16, 0.316}, {128, 0.412}, {512, 1.083}, {2048, 4.549}, {8192, 17.037}}},
		{"a100-tp4-llama3-70b", llama3_70b(), []vidurRow{{1, 0.311}, {16, 0.327}, {128, 0.419}, {512, 1.124}, {2048, 4.263}, {8192, 16.181}}},
		{"h100-llama3-8b", llama2_7b(), []vidurRow{{1, 0.175}, {16, 0.181}, {128, 0.199}, {512, 0.374}, {2048, 1.266}, {4096, 2.609}}},
		{"h100-tp4-llama3-70b", llama2_70b(), []vidurRow{{1, 0.179}, {16, 0.181}, {128, 0.199}, {512, 0.375}, {2048, 1.420}, {4096, 2.784}}},
	}
	for _, c := range cases {
		p, err := ByName(c.profile)
		if err != nil {
			t.Fatal(err)
		}
		p.Model = c.shape
		for _, r := range c.rows {
			got := p.layerSeconds(float64(r.tokens)) * 1e3
			if rel := (got - r.ms) / r.ms; math.Abs(rel) > 0.10 {
				t.Errorf("%s (%s layer), %d tokens: predicted %.3f ms, Vidur measured %.3f ms (%+.0f%%)", c.profile, c.shape.Name, r.tokens, got, r.ms, 100*rel)
			}
		}
	}
}

// TestKVCapacity checks the capacity against the arithmetic of the
// docs: 0.85 of 80 GB less the weights, over the KV bytes of a token
// (128 KiB for Llama-3-8B; 320 KiB for Llama-3-70B, a quarter on each
// GPU of four).
func TestKVCapacity(t *testing.T) {
	for name, want := range map[string]int{
		"h100-llama3-8b":      396270,
		"a100-llama3-8b":      396270,
		"h100-tp4-llama3-70b": 399460,
		"a100-tp4-llama3-70b": 399460,
	} {
		p, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.KVTokens(); got != want {
			t.Errorf("%s: %d KV tokens, want %d", name, got, want)
		}
	}
	if _, err := ByName("h100-nope"); err == nil {
		t.Error("an unknown profile was found")
	}
}

// TestStepShape checks what the costs must do whatever the factors: a
// chunk after cached context costs more than the same chunk alone
// (attention grows with it), a cached prefix costs nothing, a decode step
// grows with its batch and with the context it reads, sampling costs the
// LM head, a transfer grows with its tokens and is slower over RDMA.
func TestStepShape(t *testing.T) {
	for _, p := range Profiles() {
		fresh := p.StepTime(Step{Prefill: []Chunk{{New: 2048}}, Sampled: 1})
		deep := p.StepTime(Step{Prefill: []Chunk{{New: 2048, Cached: 30000}}, Sampled: 1})
		whole := p.StepTime(Step{Prefill: []Chunk{{New: 32048}}, Sampled: 1})
		if !(fresh < deep && deep < whole) {
			t.Errorf("%s: 2048 fresh %v, after 30000 cached %v, all 32048 %v: want increasing", p.Name, fresh, deep, whole)
		}
		small := p.StepTime(Step{Decode: 8, Context: 8 * 1000, Sampled: 8})
		wide := p.StepTime(Step{Decode: 64, Context: 64 * 1000, Sampled: 64})
		long := p.StepTime(Step{Decode: 8, Context: 8 * 20000, Sampled: 8})
		if !(small < wide && small < long) {
			t.Errorf("%s: decode 8x1000 %v, 64x1000 %v, 8x20000 %v: want the first least", p.Name, small, wide, long)
		}
		if mid := p.StepTime(Step{Prefill: []Chunk{{New: 2048}}}); mid >= fresh {
			t.Errorf("%s: a chunk that samples (%v) costs no more than one that does not (%v)", p.Name, fresh, mid)
		}
		if p.StepTime(Step{}) != 0 {
			t.Errorf("%s: an empty step takes time", p.Name)
		}
		nv, rdma := p.TransferTime(10000, p.GPU.NVLink), p.TransferTime(10000, p.GPU.RDMA)
		if !(0 < nv && nv < rdma && p.TransferTime(20000, p.GPU.RDMA) > rdma) {
			t.Errorf("%s: transfers nvlink %v, rdma %v", p.Name, nv, rdma)
		}
	}
}

// TestDecodeBound holds a one-sequence decode step to the roofline a
// reader checks first: no faster than reading every weight once at the
// data sheet's bandwidth, and within 1.5x of reading them at the fitted
// efficiency (kernel floors, the KV and the all-reduces are the rest).
func TestDecodeBound(t *testing.T) {
	for _, p := range Profiles() {
		got := p.StepTime(Step{Decode: 1, Context: 2048, Sampled: 1}).Seconds()
		weights := (p.WeightBytes() - p.Model.headParams()*bf16/float64(p.TP)) // the embedding is looked up, not read
		floor := weights / p.GPU.Bandwidth
		fitted := weights / (p.GPU.Bandwidth * p.MemoryEff)
		if got < floor || got > 1.5*fitted {
			t.Errorf("%s: one decode step takes %.2f ms; the weights take %.2f ms at the peak bandwidth, %.2f ms at the fitted one", p.Name, got*1e3, floor*1e3, fitted*1e3)
		}
	}
}
