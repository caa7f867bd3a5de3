package engine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

func TestContextWindow(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mlc-chat-config.json"), []byte(`{"context_window_size": 8192, "model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind  Kind
		model string
		args  []string
		want  int
	}{
		{KindBuiltin, "tiny", nil, 16384},
		{KindBuiltin, "tiny", []string{"--overrides", "max_num_sequence=8;max_total_seq_length=512"}, 512},
		{KindBuiltin, "tiny", []string{"--overrides", "context_window_size=100;max_total_seq_length=512"}, 100},
		{KindMLC, dir, []string{"--overrides", "max_total_seq_length=2048"}, 2048},
		{KindMLC, dir, nil, 8192},
		{KindMLC, dir, []string{"--overrides=context_window_size=4096"}, 4096},
		{KindMLC, "HF://org/model", nil, 0},
		{KindCommand, dir, nil, 0},
	} {
		if got := c.kind.Driver().ContextWindow(c.model, c.args); got != c.want {
			t.Errorf("%s %s %q: %d, want %d", c.kind, c.model, c.args, got, c.want)
		}
	}
}

// A router bounds its calls in flight on an engine by the engine's batch,
// where it can know it.
func TestBatch(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		args []string
		want int
	}{
		{KindBuiltin, []string{"--overrides", "max_num_sequence=8"}, 8},
		{KindBuiltin, nil, 64}, // the fleet's --mode server
		{KindBuiltin, []string{"--mode", "local"}, 4},
		{KindMLC, []string{"--overrides", "max_num_sequence=6;max_total_seq_length=512"}, 6},
		{KindMLC, []string{"--mode", "local"}, 4},
		{KindMLC, []string{"--mode=interactive"}, 1},
		{KindMLC, nil, 0}, // the fleet's --mode server: MLC sizes it from GPU memory
		{KindMLC, []string{"--mode", "server"}, 0},
		{KindCommand, []string{"--overrides", "max_num_sequence=8"}, 0},
	} {
		if got := c.kind.Driver().Batch("tiny", c.args); got != c.want {
			t.Errorf("%s %q: %d, want %d", c.kind, c.args, got, c.want)
		}
	}
	if n := KindBuiltin.Driver().Batch("tiny", nil); n <= 0 {
		t.Errorf("builtin default batch %d", n)
	}
}

// What each kind is: the fleet and the router read it from the driver,
// and nowhere else.
func TestKindTraits(t *testing.T) {
	for k, want := range map[Kind]Traits{
		KindBuiltin: {OnCPU: true, NeedsTokenizer: true, Extensions: ExtensionsAll},
		KindMLC:     {UsesGPUs: true, MaxLogprobs: protocol.MaxCompletionLogprobs, Extensions: ExtensionsNone, Grammar: protocol.GrammarXGrammar},
		KindCommand: {},
		"unknown":   {}, // taken for a command
	} {
		if got := k.Driver().Traits(); got != want {
			t.Errorf("%s: %+v, want %+v", k, got, want)
		}
	}
	if Kind("unknown").Registered() || !KindMLC.Registered() {
		t.Error("registered kinds mixed up")
	}
	// The built-in engine's embedding model is known to the router;
	// other kinds' are the engines' to judge.
	if dim, n := KindBuiltin.Driver().EmbeddingBounds(builtin.TinyEmbedModel, ""); dim != builtin.EmbeddingDim || n <= 0 {
		t.Errorf("builtin embedding bounds %d, %d", dim, n)
	}
	for _, k := range []Kind{KindMLC, KindCommand} {
		if dim, n := k.Driver().EmbeddingBounds(builtin.TinyEmbedModel, "e.so"); dim != 0 || n != 0 {
			t.Errorf("%s embedding bounds %d, %d", k, dim, n)
		}
	}
}

// A config's `engine <kind> [command...]` becomes the spec's program.
func TestConfigure(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind    Kind
		command []string
		program string
		args    []string
		err     string
	}{
		{KindBuiltin, nil, self, nil, ""},
		{KindBuiltin, []string{"x"}, "", nil, "engine builtin takes no command"},
		{KindMLC, nil, "", nil, ""},
		{KindMLC, []string{"python3"}, "", nil, "engine mlc takes no command"},
		{KindCommand, []string{"/bin/engine", "serve", "-v"}, "/bin/engine", []string{"serve", "-v"}, ""},
		{KindCommand, nil, "", nil, "engine command needs a program"},
		{KindCommand, []string{""}, "", nil, "engine command needs a program"},
	} {
		var s Spec
		err := c.kind.Driver().Configure(&s, c.command)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s %q: error %v, want %q", c.kind, c.command, err, c.err)
			}
			continue
		}
		if err != nil || s.Program != c.program || !slices.Equal(s.Args, c.args) {
			t.Errorf("%s %q: program %q %q (%v), want %q %q", c.kind, c.command, s.Program, s.Args, err, c.program, c.args)
		}
	}
}

// echoDriver is a kind that a test adds: its own file and its
// registration are all it takes.
type echoDriver struct{}

const kindEcho Kind = "test-echo"

func (echoDriver) Configure(s *Spec, command []string) error {
	s.Program = "/bin/echo"
	return nil
}
func (echoDriver) Normalize(s *Spec) {
	s.PrefixCacheMode = orDefault(s.PrefixCacheMode, PrefixCacheRadix)
}
func (echoDriver) Validate(s Spec) error {
	if s.ModelLib == "" {
		return errors.New("echo needs a model library")
	}
	return nil
}
func (echoDriver) Command(s Spec, i int) (string, []string) {
	return s.Program, append([]string{"serving"}, s.serveArgs(i, "echo", false)...)
}
func (echoDriver) Env(s Spec, i int) ([]string, error)       { return []string{"ECHO=1"}, nil }
func (echoDriver) NVSHMEMPython(Spec) string                 { return "/opt/echo/python" }
func (echoDriver) ContextWindow(string, []string) int        { return 7 }
func (echoDriver) Batch(string, []string) int                { return 0 }
func (echoDriver) EmbeddingBounds(string, string) (int, int) { return 0, 0 }
func (echoDriver) Traits() Traits                            { return Traits{OnCPU: true} }

func TestAKindAddedFromItsOwnFile(t *testing.T) {
	RegisterKind(kindEcho, echoDriver{})
	if !slices.Contains(Kinds(), kindEcho) || !slices.IsSorted(Kinds()) {
		t.Fatalf("kinds %q", Kinds())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a kind registered twice did not panic")
			}
		}()
		RegisterKind(kindEcho, echoDriver{})
	}()
	s := Spec{Model: "m", Kind: kindEcho, Endpoints: threeEndpoints()}
	if err := kindEcho.Driver().Configure(&s, nil); err != nil {
		t.Fatal(err)
	}
	s = s.Normalize()
	if err := s.Validate(); err == nil || err.Error() != "echo needs a model library" {
		t.Fatalf("validate: %v", err)
	}
	s.ModelLib = "e.so"
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	prog, args := s.Command(1)
	if want := "serving m --model-lib e.so --device echo --enable-debug --mode server --prefix-cache-mode radix --host 127.0.0.1 --port 8081"; prog != "/bin/echo" || strings.Join(args, " ") != want {
		t.Errorf("command %s %q, want /bin/echo %q", prog, args, want)
	}
	env, err := s.Env(1, []int{1})
	if err != nil || len(env) != 2 || !strings.HasPrefix(env[0], protocol.EnvNVSHMEMConfig+"=") || env[1] != "ECHO=1" {
		t.Errorf("env %q (%v)", env, err)
	}
	s.UID = UIDNVSHMEM
	f, err := New(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := f.launch.uidSource().(*NVSHMEMHelper); !ok || h.Python != "/opt/echo/python" {
		t.Errorf("uid source %#v", f.launch.uidSource())
	}
	if w := f.launch.deviceWord(); w != "pes" {
		t.Errorf("device word %q", w)
	}
}

// A spec of a kind nobody registered is refused.
func TestUnknownKind(t *testing.T) {
	s := Spec{Model: "m", Kind: "nope", Program: "p", Endpoints: threeEndpoints()}.Normalize()
	if err := s.Validate(); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), `unknown engine kind "nope"`) {
		t.Fatalf("validate: %v", err)
	}
}
