// Package engine runs the fleet of MLC-LLM engines that caddy-mlc routes to.
//
// It is the production counterpart of MLC-LLM's Router.__init__: from a
// [Spec] it computes every endpoint's device range ([DeviceIDStarts]),
// creates the NVSHMEM world (unique id, number of PEs, first PE of each
// endpoint), starts all engines of the world together, waits until each
// answers GET /v1/models, and then supervises them: an engine that dies is
// restarted with capped exponential backoff, ready and external engines are
// health-checked, and Stop takes every process group down, SIGTERM first
// and SIGKILL after a grace period.
//
// # Engine kinds
//
//	builtin  <program> mlc-engine <model> ... --device cpu ...
//	mlc      python3 -m mlc_llm serve <model> ... --device cuda:<start> ...
//	command  <program> <args...> <model> ... --device cuda:<start> ...
//
// See [Spec.Command] for the full argument list. The builtin engine gets no
// --overrides argument (gpu_memory_utilization means nothing on a CPU).
// Every engine gets MLC_NVSHMEM_INIT_CONFIG_JSON_STR; builtin and command
// engines also get MLC_BUILTIN_PEERS_JSON (see [Spec.Env]). The unique id
// is random for builtin and command engines and comes from NVSHMEM itself
// (through a Python helper process, [NVSHMEMHelper]) for mlc engines;
// [Spec.UID] overrides that.
//
// # Processes
//
// Each engine is the leader of its own process group, so that Stop and a
// restart reach whatever the engine started. On Linux each also gets
// Pdeathsig SIGKILL, forked from one dedicated OS thread that lives as long
// as the fleet (see spawner.go): no engine outlives caddy, even when caddy
// is killed with SIGKILL. Grandchildren do not inherit Pdeathsig; they
// die with the group on Stop, but not when caddy itself is SIGKILLed.
// Engine output is logged line by line, tagged with the endpoint and the
// stream, and the last lines are quoted in startup errors.
//
// # Restarts and NVSHMEM
//
// A restarted engine gets the same command line and environment, hence the
// same NVSHMEM world. That is what the builtin engine needs. A real MLC
// engine may not be able to rejoin an NVSHMEM world on its own (all PEs
// initialise together); restarting the whole world is left to the
// operator (caddy reload with a changed spec, or a restart of caddy).
//
// The package does not import Caddy; the Caddy module shares a [Fleet]
// across config reloads by keying it with [Spec.Key].
package engine
