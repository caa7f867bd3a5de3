package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// UIDMode says where the NVSHMEM unique id of the world comes from.
type UIDMode string

// The NVSHMEM unique id sources.
const (
	// UIDRandom draws the id from crypto/rand. Enough for the builtin
	// engine, which only needs an id shared by the world.
	UIDRandom UIDMode = "random"
	// UIDNVSHMEM asks NVSHMEM itself through a Python helper process that
	// calls TVM's runtime.disco.nvshmem.init_nvshmem_uid, as MLC does.
	UIDNVSHMEM UIDMode = "nvshmem"
)

// Prefix cache modes of the MLC engine.
const (
	PrefixCacheRadix   = protocol.PrefixCacheRadix
	PrefixCacheDisable = protocol.PrefixCacheDisable
)

// Defaults applied by [Spec.Normalize].
const (
	DefaultStartupTimeout = 10 * time.Minute
	DefaultStopGrace      = 10 * time.Second
	DefaultHealthInterval = 2 * time.Second
	DefaultHangTimeout    = 30 * time.Second
	// DefaultPython is the interpreter of KindMLC when Program is empty,
	// and the one that asks NVSHMEM for a uid for the other kinds.
	DefaultPython = "python3"
)

// Spec fully defines a fleet: the processes it runs (see [Spec.Key]) and
// how it supervises them (roles, timeouts, health checks), which
// [Fleet.Reconfigure] may change on a running fleet.
type Spec struct {
	// Model is the model directory or identifier given to every engine.
	Model string `json:"model"`
	// ModelLib is the compiled model library (--model-lib); optional.
	ModelLib string `json:"model_lib,omitempty"`
	// EmbeddingModel is the embedding model every engine serves next to
	// Model at POST /v1/embeddings (--embedding-model): a model
	// directory, or "tiny-embed" for the builtin engine; optional.
	EmbeddingModel string `json:"embedding_model,omitempty"`
	// EmbeddingModelLib is the embedding model's compiled library
	// (--embedding-model-lib), which MLC requires with an embedding model
	// and the builtin engine only records.
	EmbeddingModelLib string `json:"embedding_model_lib,omitempty"`
	// Kind selects the engine program (see [Driver]); defaults to
	// KindBuiltin.
	Kind Kind `json:"kind"`
	// Program is the binary of KindBuiltin (required) and KindCommand
	// (required), and the Python interpreter of KindMLC (default python3).
	Program string `json:"program,omitempty"`
	// Args are KindCommand's arguments, placed before the serve arguments.
	Args []string `json:"args,omitempty"`
	// EngineArgs are appended to every spawned engine's command line.
	EngineArgs []string `json:"engine_args,omitempty"`
	// PrefixCacheMode is "radix" (the default, as `mlc_llm serve`'s) or
	// "disable".
	PrefixCacheMode string `json:"prefix_cache_mode"`
	// Endpoints are the engines, in NVSHMEM PE order.
	Endpoints []Endpoint `json:"endpoints"`
	// UID selects the NVSHMEM unique id source. Defaults to UIDNVSHMEM for
	// KindMLC and UIDRandom otherwise.
	UID UIDMode `json:"uid"`
	// StartupTimeout bounds how long an engine may take to become ready.
	StartupTimeout time.Duration `json:"startup_timeout"`
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL.
	StopGrace time.Duration `json:"stop_grace"`
	// HealthInterval is the period of GET /v1/models checks of running
	// and external engines; one check times out after at most this long.
	HealthInterval time.Duration `json:"health_interval"`
	// HangTimeout is how long a spawned engine may fail every health check
	// while serving nothing before it is declared hung, killed and
	// restarted. External engines are only marked unhealthy.
	HangTimeout time.Duration `json:"hang_timeout"`
}

// Normalize returns a copy of s with defaults filled in and empty lists
// made nil, so that equal configurations compare and hash equal.
func (s Spec) Normalize() Spec {
	n := s
	n.Kind = orDefault(n.Kind, KindBuiltin)
	n.Kind.Driver().Normalize(&n)
	n.UID = orDefault(n.UID, UIDRandom)
	n.PrefixCacheMode = orDefault(n.PrefixCacheMode, PrefixCacheRadix)
	n.StartupTimeout = orDefault(n.StartupTimeout, DefaultStartupTimeout)
	n.StopGrace = orDefault(n.StopGrace, DefaultStopGrace)
	n.HealthInterval = orDefault(n.HealthInterval, DefaultHealthInterval)
	n.HangTimeout = orDefault(n.HangTimeout, DefaultHangTimeout)
	n.Args = nilIfEmpty(n.Args)
	n.EngineArgs = nilIfEmpty(n.EngineArgs)
	n.Endpoints = slices.Clone(n.Endpoints)
	for i := range n.Endpoints {
		n.Endpoints[i].Role = orDefault(n.Endpoints[i].Role, RoleAny)
	}
	return n
}

// Validate checks a normalized spec. Errors wrap [ErrInvalidSpec].
func (s Spec) Validate() error {
	if err := ValidateEndpoints(s.Endpoints); err != nil {
		return err
	}
	if !s.Kind.Registered() {
		return fmt.Errorf("%w: unknown engine kind %q", ErrInvalidSpec, s.Kind)
	}
	if err := s.Kind.Driver().Validate(s); err != nil {
		return err
	}
	if s.Model == "" && s.spawnsAny() {
		return fmt.Errorf("%w: no model", ErrInvalidSpec)
	}
	if s.EmbeddingModelLib != "" && s.EmbeddingModel == "" {
		return fmt.Errorf("%w: an embedding model library without an embedding model", ErrInvalidSpec)
	}
	if s.PrefixCacheMode != PrefixCacheRadix && s.PrefixCacheMode != PrefixCacheDisable {
		return fmt.Errorf("%w: prefix cache mode %q (want radix or disable)", ErrInvalidSpec, s.PrefixCacheMode)
	}
	if s.UID != UIDRandom && s.UID != UIDNVSHMEM {
		return fmt.Errorf("%w: uid source %q (want random or nvshmem)", ErrInvalidSpec, s.UID)
	}
	if s.StartupTimeout < 0 || s.StopGrace < 0 || s.HealthInterval < 0 || s.HangTimeout < 0 {
		return fmt.Errorf("%w: negative duration", ErrInvalidSpec)
	}
	return nil
}

// Key identifies the processes a spec runs: two specs with the same key
// start the same engines, with the same command lines, environments and
// NVSHMEM world, on the same ports. It covers the kind, program, arguments,
// model, model library, embedding model and its library, engine
// arguments, prefix cache mode, every endpoint's host, port, GPUs and
// external flag (which fix the PE numbering) and the uid source; not the
// roles, timeouts or health settings, which a running fleet takes
// through [Fleet.Reconfigure]. The
// Caddy module keys its fleet pool with it, so that a reload which changes
// only those keeps the engines (a second fleet with the same key would
// fight the first for its ports).
func (s Spec) Key() string {
	b, err := json.Marshal(s.Normalize().identity())
	if err != nil { // cannot happen: identity holds only strings, ints and bools
		panic(fmt.Sprintf("engine: marshal spec: %v", err))
	}
	sum := sha256.Sum256(b)
	return "mlc-engine-fleet-" + hex.EncodeToString(sum[:16])
}

// identity is what [Spec.Key] hashes: what defines the processes.
type identity struct {
	Kind     Kind     `json:"kind"`
	Program  string   `json:"program"`
	Args     []string `json:"args"`
	Model    string   `json:"model"`
	ModelLib string   `json:"model_lib"`
	// Absent when empty, so that the keys of fleets without them stay
	// those they were.
	EmbeddingModel    string             `json:"embedding_model,omitempty"`
	EmbeddingModelLib string             `json:"embedding_model_lib,omitempty"`
	EngineArgs        []string           `json:"engine_args"`
	PrefixCacheMode   string             `json:"prefix_cache_mode"`
	UID               UIDMode            `json:"uid"`
	Endpoints         []endpointIdentity `json:"endpoints"`
}

type endpointIdentity struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	GPUs     int    `json:"gpus"`
	External bool   `json:"external"`
}

func (s Spec) identity() identity {
	id := identity{Kind: s.Kind, Program: s.Program, Args: s.Args, Model: s.Model, ModelLib: s.ModelLib,
		EmbeddingModel: s.EmbeddingModel, EmbeddingModelLib: s.EmbeddingModelLib,
		EngineArgs: s.EngineArgs, PrefixCacheMode: s.PrefixCacheMode, UID: s.UID}
	for _, ep := range s.Endpoints {
		id.Endpoints = append(id.Endpoints, endpointIdentity{Host: ep.Host, Port: ep.Port, GPUs: ep.GPUs, External: ep.External})
	}
	return id
}

// DeviceIDStarts returns the device id starts of the spec's endpoints.
func (s Spec) DeviceIDStarts() []int {
	return DeviceIDStarts(endpointGPUs(s.Endpoints))
}

// LocalGPUsNeeded returns how many GPUs this machine needs for the engines
// it spawns: the end of the highest device range of a spawned endpoint.
func (s Spec) LocalGPUsNeeded() int {
	starts := s.DeviceIDStarts()
	needed := 0
	for i, ep := range s.Endpoints {
		if !ep.External {
			needed = max(needed, starts[i+1])
		}
	}
	return needed
}

// needsProgram refuses a spec that spawns engines without a program.
func (s Spec) needsProgram() error {
	if s.Program == "" && s.spawnsAny() {
		return fmt.Errorf("%w: engine %s needs a program", ErrInvalidSpec, s.Kind)
	}
	return nil
}

func (s Spec) spawnsAny() bool { return len(Spawned(s.Endpoints)) > 0 }

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
