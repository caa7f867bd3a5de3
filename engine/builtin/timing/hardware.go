package timing

import (
	"math"
	"time"
)

// GPU is one accelerator as its data sheet gives it, and the links its
// node offers for KV transfers.
type GPU struct {
	Name      string
	FLOPS     float64 // dense bf16, per second
	Bandwidth float64 // HBM, bytes per second
	Memory    float64 // bytes
	// NVLink is a transfer between two GPUs of a node, RDMA one between
	// nodes (the NIC's, 400 Gb/s InfiniBand or RoCE class).
	NVLink, RDMA Link
}

// Link is a path KV or activations take: a fixed latency, then bytes at
// a bandwidth.
type Link struct {
	Name      string
	Latency   time.Duration
	Bandwidth float64 // bytes per second
}

// seconds is how long bytes take on the link.
func (l Link) seconds(bytes float64) float64 {
	return l.Latency.Seconds() + bytes/l.Bandwidth
}

// The links, fitted (latency + bytes/bandwidth) on Vidur's send_recv
// profiles of 1 MiB to 64 MiB (data/profiling/network/*_dgx/send_recv.csv):
// within a node, and, for RDMA, across the H100 nodes' 400 Gb/s network
// (36.5 GB/s, 73% of the line rate). Vidur's A100 cluster measured 7.8
// GB/s across nodes, a slower network than this class; the RDMA link is
// the NIC's, the same for both GPUs.
func nvlinkH100() Link {
	return Link{Name: "nvlink", Latency: 8 * time.Microsecond, Bandwidth: 363.2e9}
}
func nvlinkA100() Link {
	return Link{Name: "nvlink", Latency: 13 * time.Microsecond, Bandwidth: 305.3e9}
}
func rdma400() Link { return Link{Name: "rdma", Latency: 19 * time.Microsecond, Bandwidth: 36.5e9} }

// The GPUs, from NVIDIA's data sheets (SXM form factor, dense bf16).
func h100() GPU {
	return GPU{Name: "H100 SXM5 80GB", FLOPS: 989e12, Bandwidth: 3.35e12, Memory: 80e9, NVLink: nvlinkH100(), RDMA: rdma400()}
}

func a100() GPU {
	return GPU{Name: "A100 SXM4 80GB", FLOPS: 312e12, Bandwidth: 2.039e12, Memory: 80e9, NVLink: nvlinkA100(), RDMA: rdma400()}
}

// Model is a decoder's shape (Llama-style: grouped-query attention, a
// gated MLP, untied embeddings), weights in bf16.
type Model struct {
	Name                                string
	Layers, Hidden, Heads, KVHeads, FFN int
	HeadDim, Vocab, Context             int
}

// The models, from Meta's configs (Vidur's data/model_configs/meta-llama)
// with Llama-3.1's context of 131,072 tokens.
func llama3_8b() Model {
	return Model{Name: "Llama-3-8B", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, HeadDim: 128, Vocab: 128256, Context: 131072}
}

func llama3_70b() Model {
	return Model{Name: "Llama-3-70B", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 28672, HeadDim: 128, Vocab: 128256, Context: 131072}
}

// bf16 is the bytes of one weight, key or value.
const bf16 = 2

// layerParams is the weights of one layer: the query, key, value and
// output projections and the three MLP matrices (norms are negligible).
func (m Model) layerParams() float64 {
	d, kv := float64(m.Hidden), float64(m.KVHeads*m.HeadDim)
	return d*(d+2*kv) + d*d + 3*d*float64(m.FFN)
}

// headParams is the LM head's weights (and the embedding's: untied).
func (m Model) headParams() float64 { return float64(m.Vocab) * float64(m.Hidden) }

// Params is the model's weights in all.
func (m Model) Params() float64 {
	return float64(m.Layers)*m.layerParams() + 2*m.headParams()
}

// KVBytesPerToken is one token's keys and values over every layer.
func (m Model) KVBytesPerToken() float64 {
	return float64(2 * m.Layers * m.KVHeads * m.HeadDim * bf16)
}

// hypot is the bend between two regimes (see the package doc).
func hypot(a, b float64) float64 { return math.Hypot(a, b) }
