package builtin

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/timing"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Options are the engine's command-line settings, as `mlc_llm serve` takes
// them.
type Options struct {
	Model    string
	ModelLib string // recorded only
	// EmbeddingModel, when set, is served at POST /v1/embeddings:
	// TinyEmbedModel or a directory with tokenizer.json (see embedder).
	EmbeddingModel    string
	EmbeddingModelLib string // recorded only
	Device            string // recorded only: compute is always on the CPU
	EnableDebug       bool
	Mode              string // local, interactive or server
	PrefixCacheMode   string // radix or disable
	Host              string
	Port              int
	Overrides         Overrides
	// Replies is a --replies file (tests only): a JSON array of
	// {"match": substring, "reply": text}; a context an entry matches is
	// answered with its reply instead of the model's tokens (see
	// replies.go and the package documentation, "Scripted replies").
	Replies string
	// Slowness is compute time the engine adds to its own, to play a
	// slower accelerator (--prefill-delay, --decode-delay); changed at run
	// time through protocol.PathSlowness.
	Slowness protocol.Slowness
	// Timing, when set (--timing <profile>), makes the engine a timed
	// one: no model arithmetic; every step waits what the profile's GPUs
	// would take (see timed.go and package timing).
	Timing *timing.Profile
	// TimeScale multiplies every duration a timed engine models
	// (--time-scale k): a fleet too fast for the CPUs under it runs k
	// times slower than real time, each figure divided by k after.
	TimeScale float64
	// KVLink is the link a timed engine's KV transfers take
	// (--kv-link): nvlink or rdma.
	KVLink timing.Link
	// EOSEvery is how rarely a timed engine's generator ends a text by
	// itself (--eos-every n: EOS once in n tokens on average; 0 never,
	// so that max_tokens sets every length, as a trace replay through a
	// router, which sends engines no ignore_eos, needs).
	EOSEvery int
}

// Overrides are the --overrides settings the engine uses.
type Overrides struct {
	MaxTotalSeqLength int           // KV capacity in tokens
	ContextWindowSize int           // tokens of one sequence at most; 0: the model's (see contextWindow)
	MaxNumSequence    int           // running sequences at most (default by --mode)
	PrefillChunkSize  int           // prompt tokens prefilled per step at most
	PrepRecvTimeout   time.Duration // prep_recv pages are reclaimed after this
	Ignored           []string      // keys accepted but not used
}

// modeBatch is the default max_num_sequence of each --mode, as MLC sizes
// its batch: one for interactive use, four locally, many for a server.
var modeBatch = map[string]int{"interactive": 1, "local": 4, "server": 64}

// errUsage marks command-line errors (exit status 2).
var errUsage = errors.New("usage")

// defaultOverrides are the settings before --overrides applies; fill
// sets those it leaves at 0 that --overrides did not.
func defaultOverrides() Overrides {
	return Overrides{PrepRecvTimeout: time.Minute}
}

// The sizes of the KV cache and of a step's prefill when --overrides
// gives none: the built-in model's, and a timed engine's (its profile's
// KV capacity, and 2048 tokens a step, a common chunked-prefill budget:
// vLLM's max_num_batched_tokens when it chunks prefills).
const (
	defaultKVTokens     = 16384
	defaultPrefillChunk = 512
	timedPrefillChunk   = 2048
)

// fill sets the sizes --overrides left unset, for profile p (nil: the
// built-in model).
func (ov *Overrides) fill(p *timing.Profile) {
	kv, chunk := defaultKVTokens, defaultPrefillChunk
	if p != nil {
		kv, chunk = p.KVTokens(), timedPrefillChunk
	}
	if ov.MaxTotalSeqLength == 0 {
		ov.MaxTotalSeqLength = kv
	}
	if ov.PrefillChunkSize == 0 {
		ov.PrefillChunkSize = chunk
	}
}

// setTiming resolves --timing, --time-scale and --kv-link: the last two
// only go with the first, which replaces the compute that
// --prefill-delay and --decode-delay add to.
func (o *Options) setTiming(profile, link string, fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if profile == "" {
		if given["time-scale"] || given["kv-link"] || given["eos-every"] {
			return fmt.Errorf("--time-scale, --kv-link and --eos-every go with --timing")
		}
		return nil
	}
	p, err := timing.ByName(profile)
	if err != nil {
		return fmt.Errorf("--timing: %w", err)
	}
	if o.Slowness != (protocol.Slowness{}) {
		return fmt.Errorf("--timing replaces the model's compute: --prefill-delay and --decode-delay add to it, and go without")
	}
	if o.EOSEvery < 0 {
		return fmt.Errorf("--eos-every: want 0 (never) or more, got %d", o.EOSEvery)
	}
	if !(o.TimeScale > 0) || o.TimeScale > 1000 {
		return fmt.Errorf("--time-scale: want a number above 0, at most 1000, got %v", o.TimeScale)
	}
	if o.KVLink, err = p.Link(link); err != nil {
		return fmt.Errorf("--kv-link: %w", err)
	}
	o.Timing = &p
	return nil
}

// ParseArgs parses `<model> [flags]`.
func ParseArgs(args []string, stderr io.Writer) (*Options, error) {
	o := &Options{Overrides: defaultOverrides()}
	fs := flag.NewFlagSet("mlc-engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.ModelLib, "model-lib", "", "model library (recorded; the built-in engine has its own)")
	fs.StringVar(&o.EmbeddingModel, "embedding-model", "", "embedding model served at /v1/embeddings: "+TinyEmbedModel+" or a directory with tokenizer.json")
	fs.StringVar(&o.EmbeddingModelLib, "embedding-model-lib", "", "embedding model library (recorded; the built-in engine has its own)")
	fs.StringVar(&o.Device, "device", "cpu", "device: cpu or cuda:N (recorded; compute runs on the CPU)")
	fs.BoolVar(&o.EnableDebug, "enable-debug", false, "honour debug_config in requests")
	fs.StringVar(&o.Mode, "mode", "local", "local, interactive or server")
	fs.StringVar(&o.PrefixCacheMode, "prefix-cache-mode", protocol.PrefixCacheRadix, "radix or disable")
	fs.StringVar(&o.Host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&o.Port, "port", 8000, "port to listen on")
	fs.DurationVar(&o.Slowness.PrefillPerToken, "prefill-delay", 0, "compute time added per prompt token prefilled (a slower GPU; built-in only)")
	fs.DurationVar(&o.Slowness.DecodePerStep, "decode-delay", 0, "compute time added per decode step of the batch (a slower GPU; built-in only)")
	profile := fs.String("timing", "", "timed engine: the model's arithmetic replaced by the time this GPU profile would take, spent waiting ("+strings.Join(timing.ProfileNames(), ", ")+"; built-in only)")
	fs.Float64Var(&o.TimeScale, "time-scale", 1, "--timing: every modelled duration times this (above 1: slower than real time)")
	link := fs.String("kv-link", "nvlink", "--timing: the link KV transfers take, nvlink or rdma")
	fs.IntVar(&o.EOSEvery, "eos-every", defaultEOSEvery, "--timing: the generator ends a text once in this many tokens on average; 0 never (max_tokens sets every length)")
	fs.StringVar(&o.Replies, "replies", "", `tests only: JSON file of [{"match": "<substring>", "reply": "<text>"}]; a context whose prompt part holds a match (latest wins, "" always) is answered with that reply, then "stop" (built-in only)`)
	overrides := fs.String("overrides", "", `engine settings, "key=value;key=value"`)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mlc-engine <model> [flags]   (<model>: tiny or a directory with tokenizer.json)")
		fs.PrintDefaults()
	}
	model, rest := splitModel(args)
	if err := fs.Parse(rest); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if model == "" && fs.NArg() > 0 {
		model, rest = fs.Arg(0), fs.Args()[1:]
		if err := fs.Parse(rest); err != nil {
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	if model == "" || fs.NArg() > 0 {
		fs.Usage()
		return nil, fmt.Errorf("%w: want exactly one model argument", errUsage)
	}
	o.Model = model
	if err := o.setTiming(*profile, *link, fs); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := o.validate(*overrides, stderr); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// splitModel takes the model when it comes first, as MLC writes it.
func splitModel(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

func (o *Options) validate(overrides string, log io.Writer) error {
	switch o.Mode {
	case "local", "interactive", "server":
	default:
		return fmt.Errorf("--mode: want local, interactive or server, got %q", o.Mode)
	}
	switch o.PrefixCacheMode {
	case protocol.PrefixCacheRadix, protocol.PrefixCacheDisable:
	default:
		return fmt.Errorf("--prefix-cache-mode: want radix or disable, got %q", o.PrefixCacheMode)
	}
	if o.Device != "cpu" && !strings.HasPrefix(o.Device, "cuda") && o.Device != "auto" {
		return fmt.Errorf("--device: want cpu or cuda:N, got %q", o.Device)
	}
	if err := o.Slowness.Validate(); err != nil {
		return err
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("--port: %d is out of range", o.Port)
	}
	if err := o.Overrides.parse(overrides); err != nil {
		return fmt.Errorf("--overrides: %w", err)
	}
	if o.Overrides.MaxNumSequence == 0 {
		o.Overrides.MaxNumSequence = modeBatch[o.Mode]
	}
	o.Overrides.fill(o.Timing)
	for _, k := range o.Overrides.Ignored {
		fmt.Fprintf(log, "mlc-engine: override %q is ignored by the built-in engine\n", k)
	}
	return nil
}

// parse applies "key=value;key=value".
func (ov *Overrides) parse(s string) error {
	for kv := range strings.SplitSeq(s, ";") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", kv)
		}
		if err := ov.set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	return nil
}

func (ov *Overrides) set(k, v string) error {
	var dst *int
	switch k {
	case "max_total_seq_length":
		dst = &ov.MaxTotalSeqLength
	case "context_window_size":
		dst = &ov.ContextWindowSize
	case "max_num_sequence":
		dst = &ov.MaxNumSequence
	case "prefill_chunk_size":
		dst = &ov.PrefillChunkSize
	case "prep_recv_timeout_ms":
		n, err := positive(k, v)
		ov.PrepRecvTimeout = time.Duration(n) * time.Millisecond
		return err
	default:
		ov.Ignored = append(ov.Ignored, k)
		return nil
	}
	n, err := positive(k, v)
	*dst = n
	return err
}

func positive(k, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: want a positive integer, got %q", k, v)
	}
	return n, nil
}
