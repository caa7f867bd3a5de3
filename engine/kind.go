package engine

import (
	"fmt"
	"slices"
	"sync"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Kind names a kind of engine program, in a [Spec] and in configs
// (`engine builtin|mlc|command`). What a kind is, its [Driver] says.
type Kind string

// Driver is a kind of engine: how the fleet starts its processes, what
// they need of the machine, and what a router in front of them must know
// that it cannot ask them. Each kind implements it in a file of its own
// and registers itself ([RegisterKind]); nothing else tells the kinds
// apart. What an engine serves beyond MLC's API (the release extension,
// its load in a final usage) the router learns from the engine itself.
//
// A driver's methods get the spec they are about; they must not keep it.
type Driver interface {
	// Configure sets the spec's Program and Args from what a config
	// says after `engine <kind>`: the command (a program and its
	// arguments) of a kind that takes one, which it then needs; a kind
	// that takes none refuses one.
	Configure(s *Spec, command []string) error
	// Normalize fills in the kind's defaults (see [Spec.Normalize]).
	Normalize(s *Spec)
	// Validate checks what the kind needs of a normalized spec, beyond
	// what every spec needs (see [Spec.Validate]).
	Validate(s Spec) error
	// Command returns the program and arguments that start engine i
	// (see [Spec.Command]).
	Command(s Spec, i int) (program string, args []string)
	// Env returns the environment variables, as KEY=VALUE, that engine
	// i gets besides its NVSHMEM config (see [Spec.Env]).
	Env(s Spec, i int) ([]string, error)
	// NVSHMEMPython is the Python interpreter that asks NVSHMEM for the
	// world's unique id, with [UIDNVSHMEM].
	NVSHMEMPython(s Spec) string
	// ContextWindow is the most tokens one sequence (prompt and
	// generation) may hold on engines serving model with engineArgs, or
	// 0 when it cannot be known: a router refuses longer requests
	// before any engine sees them.
	ContextWindow(model string, engineArgs []string) int
	// Batch is how many sequences one engine runs at once, 0 when it
	// cannot be known: a router holds what is beyond it in its own fair
	// queue.
	Batch(model string, engineArgs []string) int
	// EmbeddingBounds are the dimension of the embedding model's
	// vectors and the most tokens of one input, each 0 when it cannot
	// be known: a router refuses what the model cannot embed.
	EmbeddingBounds(model, lib string) (dim, maxTokens int)
	// Traits are what the kind's engines are.
	Traits() Traits
}

// Traits are what a kind's engines are, as the fleet and the routers in
// front of them need to know.
type Traits struct {
	// OnCPU: the engines run on the CPU, and an endpoint's gpus count
	// its NVSHMEM PEs.
	OnCPU bool
	// UsesGPUs: the engines run on this machine's GPUs, which the fleet
	// counts before it starts them and the router reads for metrics.
	UsesGPUs bool
	// NeedsTokenizer: an engine cannot run without the model's
	// tokenizer, so neither can a router in front of it.
	NeedsTokenizer bool
	// MaxLogprobs bounds the top logprobs of a completion request to the
	// engines (a chat's top_logprobs reach them as that); 0: the API's
	// own bounds.
	MaxLogprobs int
	// Extensions says whether the engines serve caddy-mlc's extensions
	// of MLC's API.
	Extensions Extensions
	// Grammar is the grammar engine that compiles a response format's
	// schema on the engines: a router checks schemas as it does.
	Grammar protocol.SchemaGrammar
}

// Extensions says whether a kind's engines serve caddy-mlc's extensions
// of MLC's API: POST /microserving/release, their NVSHMEM world and
// load in query_engine_metrics, and response_format's resumed_tokens. The router asks an engine in any case
// (an engine that answers 404 has none); a check of the engines expects
// them, or not, by it.
type Extensions uint8

const (
	// ExtensionsMaybe: the engines may serve them (a command may run
	// either kind of engine).
	ExtensionsMaybe Extensions = iota
	// ExtensionsNone: the engines serve MLC's API only.
	ExtensionsNone
	// ExtensionsAll: the engines serve every one of them.
	ExtensionsAll
)

var kinds struct {
	sync.RWMutex
	m map[Kind]Driver
}

// RegisterKind makes kind k run by d. Kinds register themselves in an
// init function; registering a kind twice panics.
func RegisterKind(k Kind, d Driver) {
	kinds.Lock()
	defer kinds.Unlock()
	if _, dup := kinds.m[k]; dup {
		panic(fmt.Sprintf("engine: kind %q registered twice", k))
	}
	if kinds.m == nil {
		kinds.m = map[Kind]Driver{}
	}
	kinds.m[k] = d
}

// Registered reports whether kind k was registered.
func (k Kind) Registered() bool {
	kinds.RLock()
	defer kinds.RUnlock()
	_, ok := kinds.m[k]
	return ok
}

// Driver returns the driver of kind k. A kind nobody registered, which
// [Spec.Validate] refuses, is taken for a command: a program the fleet
// and the router know nothing of.
func (k Kind) Driver() Driver {
	kinds.RLock()
	defer kinds.RUnlock()
	if d, ok := kinds.m[k]; ok {
		return d
	}
	return commandDriver{}
}

// Kinds returns the registered kinds, sorted.
func Kinds() []Kind {
	kinds.RLock()
	defer kinds.RUnlock()
	out := make([]Kind, 0, len(kinds.m))
	for k := range kinds.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
