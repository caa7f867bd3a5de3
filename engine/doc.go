// Package engine runs the fleet of MLC-LLM engines that caddy-mlc routes to.
//
// It is the production counterpart of MLC-LLM's Router.__init__: from a
// [Spec] it computes every endpoint's device range ([DeviceIDStarts]),
// creates the NVSHMEM world (unique id, number of PEs, first PE of each
// endpoint), starts all engines of the world together, waits until each
// answers GET /v1/models, and then supervises them: an engine that dies is
// restarted with capped exponential backoff, running and external engines
// are health-checked, and Stop takes every process group down, SIGTERM
// first and SIGKILL after a grace period.
//
// # Health
//
// Health has an active and a passive half. Every health interval (2 s by
// default) each engine gets GET /v1/models, which times out after at most
// one interval; two failures in a row make it unhealthy (out of rotation)
// until a check succeeds again. The router reports real work with
// [Fleet.Served]; while an engine served within the last two intervals,
// its failed checks do not count: it is busy, not down. A spawned engine
// that answered no check and served nothing for the hang timeout (30 s by
// default) is hung, stopped or deadlocked: its process group is killed and
// it is restarted as after a crash. External engines are never killed.
// [Fleet.Status] reads an engine's state and process together; an engine
// is never seen ready without a live process.
//
// # Engine kinds
//
//	builtin  <program> mlc-engine <model> ... --device cpu ...
//	mlc      python3 -m mlc_llm serve <model> ... --device cuda:<start> ...
//	command  <program> <args...> <model> ... --device cuda:<start> ...
//
// Each kind is a [Driver] in a file of its own (kind_builtin.go,
// kind_mlc.go, kind_command.go) that registers it with [RegisterKind]:
// its command line and environment, its defaults and checks, whether it
// runs on the CPU or on this machine's GPUs, and what a router in front
// of it must know (the context window, the tokenizer, a logprobs bound).
// Adding a kind is adding such a file.
//
// See [Spec.Command] for the full argument list. The builtin engine gets no
// --overrides argument (gpu_memory_utilization means nothing on a CPU).
// A spec's embedding model reaches every engine as --embedding-model
// (and --embedding-model-lib), which MLC and the builtin engine serve at
// POST /v1/embeddings; MLC needs the library, so a spec of mlc engines
// without it is invalid.
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
//
// Engine output is logged line by line, tagged with the endpoint, the PID
// and the stream, at Debug unless the line looks like a warning or an
// error (see lineLevel in outputlevel.go); the last lines are quoted in
// the errors of engines that fail to start or exit. Every goroutine of the
// fleet recovers from panics: supervision and output readers carry on,
// and the spawner's thread, which Pdeathsig is tied to, never ends early.
//
// # Reloads
//
// [Spec.Key] covers only what defines the processes: kind, program,
// arguments, model, model library, embedding model and library, engine
// arguments, prefix cache mode,
// endpoints (host, port, GPUs, external) and uid source. The Caddy module
// shares a [Fleet] across config reloads by that key, so a reload that
// changes only roles, timeouts, health settings or router settings keeps
// the running engines, and hands them the new settings and logger with
// [Fleet.Reconfigure]. A reload that changes the key starts a new fleet
// before the old config stops: [Spec.CheckPorts] tells it whether its
// ports are free yet (the Caddy module then waits for the old engines to
// stop), and an engine whose port is taken when it is spawned fails with
// [ErrPortInUse] rather than answer another process's readiness checks.
//
// # Restarts and NVSHMEM
//
// A restarted engine gets the same command line and environment, hence the
// same NVSHMEM world. That is what the builtin engine needs. A real MLC
// engine may not be able to rejoin an NVSHMEM world on its own (all PEs
// initialise together); restarting the whole world is left to the
// operator (a restart of caddy, or a reload that changes the fleet's key).
//
// The package does not import Caddy.
package engine
