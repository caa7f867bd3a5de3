package engine

import (
	"strconv"
)

// GPUMemoryUtilization is the --overrides value given to GPU engines, as
// MLC's router does.
const GPUMemoryUtilization = "gpu_memory_utilization=0.8"

// Command returns the program and arguments that start engine i of a
// normalized spec, as its kind's [Driver] makes them of the serve
// arguments:
//
//	builtin: <program> mlc-engine <serve args with --device cpu>
//	mlc:     <python> -m mlc_llm serve <serve args>
//	command: <program> <args...> <serve args>
//
// The serve arguments are MLC's:
//
//	<model> [--model-lib PATH] [--embedding-model PATH
//	[--embedding-model-lib PATH]] --device cuda:<start> --enable-debug
//	--mode server --prefix-cache-mode radix|disable
//	--overrides gpu_memory_utilization=0.8 --host H --port P <engine_args...>
//
// For the builtin engine the device is "cpu" and the --overrides argument
// is left out: gpu_memory_utilization means nothing to a CPU engine.
func (s Spec) Command(i int) (program string, args []string) {
	return s.Kind.Driver().Command(s, i)
}

// cudaDevice returns the first CUDA device of engine i.
func (s Spec) cudaDevice(i int) string {
	return "cuda:" + strconv.Itoa(s.DeviceIDStarts()[i])
}

// serveArgs returns the MLC serve arguments of engine i.
func (s Spec) serveArgs(i int, device string, gpuOverrides bool) []string {
	ep := s.Endpoints[i]
	args := []string{s.Model}
	if s.ModelLib != "" {
		args = append(args, "--model-lib", s.ModelLib)
	}
	if s.EmbeddingModel != "" {
		args = append(args, "--embedding-model", s.EmbeddingModel)
		if s.EmbeddingModelLib != "" {
			args = append(args, "--embedding-model-lib", s.EmbeddingModelLib)
		}
	}
	args = append(args,
		"--device", device,
		"--enable-debug",
		"--mode", "server",
		"--prefix-cache-mode", s.PrefixCacheMode,
	)
	if gpuOverrides {
		args = append(args, "--overrides", GPUMemoryUtilization)
	}
	args = append(args, "--host", ep.Host, "--port", strconv.Itoa(ep.Port))
	return append(args, s.EngineArgs...)
}
