// Package timing is the cost model of the built-in engine's timed mode
// (`caddy mlc-engine <model> --timing <profile>`): how long a named GPU
// would take to run one engine step, or to send a window of KV to
// another engine, for a named model. The engine spends that time waiting
// instead of computing; its scheduler, KV pages, prefix cache and
// preemption stay real (see package builtin, "Timed engines").
//
// # The model
//
// A step is one forward pass over the step's tokens: the chunks of the
// prompts being prefilled and one token of every decoding sequence, as
// vLLM and SGLang run chunked prefill. Its time is the sum of
//
//   - the linear layers, per layer hypot(compute, memory): compute is
//     2 FLOPs per weight per token over the GPU's dense bf16 peak times a
//     compute efficiency, memory the layer's weights read once over its
//     HBM bandwidth times a memory efficiency. The hypotenuse, rather
//     than the larger of the two, fits the bend between the
//     memory-bound and the compute-bound regimes of the measurements;
//   - the element-wise kernels (norms, rotary embedding, activation,
//     residual adds), per layer hypot(floor, perToken x tokens);
//   - attention, per layer the larger of its FLOPs (4 per query-key pair
//     and head dimension: the causal triangle of each chunk over its
//     cached context) over the peak times an attention efficiency, and
//     the KV it reads over the bandwidth;
//   - the LM head of the sequences that sample (a prefill's last chunk, a
//     decode step), as a linear layer of vocab x hidden;
//   - under tensor parallelism, two all-reduces of the step's activations
//     per layer, each a latency plus bytes over a bus bandwidth.
//
// A KV transfer is a latency plus the window's KV bytes over the link:
// NVLink-class between GPUs of a node, RDMA-class between nodes. Under
// tensor parallelism each GPU sends its own heads' share on its own link.
//
// # Sources
//
// Hardware: NVIDIA's data sheets (H100 SXM5: 989 TFLOPS dense bf16,
// 3.35 TB/s HBM3, 80 GB; A100 SXM4 80GB: 312 TFLOPS, 2.039 TB/s, 80 GB).
// Models: Meta's configs of Llama-3-8B and Llama-3-70B (as Vidur's
// data/model_configs hold them), with Llama-3.1's 131,072-token context.
// The efficiencies and the element-wise costs are fitted on Microsoft
// Vidur's per-operator profiles (microsoft/vidur,
// data/profiling/compute/<gpu>/<model>/mlp.csv: the median time of each
// operator of one layer at 1 to 32,768 tokens), the all-reduces and the
// links on its network profiles (data/profiling/network/{a100,h100}_dgx:
// all_reduce of 4 GPUs in a node, send_recv within and across nodes);
// each profile names the rows it was fitted on, and docs/engine.md shows
// the measurements beside the predictions. Attention has no profile in
// Vidur's release: its efficiency is within the range FlashAttention-2
// (Dao, 2023: 50-73% of A100's peak, forward) and FlashAttention-3 (Shah
// et al., 2024: up to 75% of H100's) report, at the low end, for serving
// kernels over paged KV. The KV capacity is MLC's: gpu_memory_utilization
// 0.85 of the GPU's memory (mlc_llm serve's default), less the weights,
// over the KV bytes of a token.
//
// # What it leaves out
//
// CPU overheads of a step (Vidur leaves them out by default too; CUDA
// graphs hide most of them in decode), quantization, speculative
// decoding, the variance of real kernels, and the contention of a
// transfer with the step that overlaps it.
package timing
