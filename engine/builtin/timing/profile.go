package timing

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Profile is a model served on a GPU (TP of them, tensor-parallel): what
// a timed engine's steps and transfers cost.
type Profile struct {
	Name  string
	GPU   GPU
	Model Model
	TP    int
	// The fitted factors (see the package doc): the share of the GPU's
	// peak the linear layers reach, of its bandwidth they and attention's
	// KV reads reach, and of its peak attention reaches.
	ComputeEff, MemoryEff, AttentionEff float64
	// The element-wise kernels of one layer: per token, and the floor of
	// a launch.
	ElementwisePerToken, ElementwiseFloor time.Duration
	// AllReduce is the tensor-parallel group's all-reduce (TP > 1).
	AllReduce Link
	// Fitted names the measurements the factors come from.
	Fitted string
}

// memoryUtilization is the share of a GPU's memory MLC's engine takes in
// all (mlc_llm serve's gpu_memory_utilization default).
const memoryUtilization = 0.85

// Profiles are the named profiles, in the order the docs list them.
func Profiles() []Profile {
	return []Profile{
		{
			Name: "h100-llama3-8b", GPU: h100(), Model: llama3_8b(), TP: 1,
			ComputeEff: 0.754, MemoryEff: 0.783, AttentionEff: 0.6,
			ElementwisePerToken: 94 * time.Nanosecond, ElementwiseFloor: 20 * time.Microsecond,
			Fitted: "Vidur h100/meta-llama/Llama-2-7b-hf mlp.csv, TP 1 (the same hidden width, 4096; Vidur's release profiles no Llama-3-8B on H100)",
		},
		{
			Name: "a100-llama3-8b", GPU: a100(), Model: llama3_8b(), TP: 1,
			ComputeEff: 0.729, MemoryEff: 0.758, AttentionEff: 0.5,
			ElementwisePerToken: 173 * time.Nanosecond, ElementwiseFloor: 26 * time.Microsecond,
			Fitted: "Vidur a100/meta-llama/Meta-Llama-3-8B mlp.csv, TP 1",
		},
		{
			Name: "h100-tp4-llama3-70b", GPU: h100(), Model: llama3_70b(), TP: 4,
			ComputeEff: 0.744, MemoryEff: 0.789, AttentionEff: 0.6,
			ElementwisePerToken: 98 * time.Nanosecond, ElementwiseFloor: 20 * time.Microsecond,
			AllReduce: Link{Name: "all-reduce", Latency: 30 * time.Microsecond, Bandwidth: 259.6e9},
			Fitted:    "Vidur h100/meta-llama/Llama-2-70b-hf mlp.csv, TP 4 (Llama-3-70B's shape but the vocabulary); h100_dgx all_reduce.csv, 4 GPUs",
		},
		{
			Name: "a100-tp4-llama3-70b", GPU: a100(), Model: llama3_70b(), TP: 4,
			ComputeEff: 0.754, MemoryEff: 0.718, AttentionEff: 0.5,
			ElementwisePerToken: 175 * time.Nanosecond, ElementwiseFloor: 24 * time.Microsecond,
			AllReduce: Link{Name: "all-reduce", Latency: 30 * time.Microsecond, Bandwidth: 95.3e9},
			Fitted:    "Vidur a100/meta-llama/Meta-Llama-3-70B mlp.csv, TP 4; a100_dgx all_reduce.csv, 4 GPUs",
		},
	}
}

// ProfileNames are the profiles' names.
func ProfileNames() []string {
	var out []string
	for _, p := range Profiles() {
		out = append(out, p.Name)
	}
	return out
}

// ByName returns the profile called name.
func ByName(name string) (Profile, error) {
	ps := Profiles()
	if i := slices.IndexFunc(ps, func(p Profile) bool { return p.Name == name }); i >= 0 {
		return ps[i], nil
	}
	return Profile{}, fmt.Errorf("no timing profile %q; the profiles: %s", name, strings.Join(ProfileNames(), ", "))
}

// WeightBytes is the weights one GPU of the profile holds.
func (p Profile) WeightBytes() float64 { return p.Model.Params() * bf16 / float64(p.TP) }

// KVBytesPerToken is the KV one GPU of the profile holds per token: its
// share of the heads.
func (p Profile) KVBytesPerToken() float64 { return p.Model.KVBytesPerToken() / float64(p.TP) }

// KVTokens is the KV capacity of the profile: what is left of the
// memory MLC takes once the weights are in, in tokens.
func (p Profile) KVTokens() int {
	free := p.GPU.Memory*memoryUtilization - p.WeightBytes()
	return max(int(free/p.KVBytesPerToken()), 0)
}

// Link returns the profile's link of that name: nvlink or rdma.
func (p Profile) Link(name string) (Link, error) {
	switch name {
	case "nvlink":
		return p.GPU.NVLink, nil
	case "rdma":
		return p.GPU.RDMA, nil
	}
	return Link{}, fmt.Errorf("no link %q: want nvlink or rdma", name)
}
