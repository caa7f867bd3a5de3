package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// threeEndpoints has GPUs [2,1,1], so device starts [0,2,3,4].
func threeEndpoints() []Endpoint {
	return []Endpoint{
		{Host: "127.0.0.1", Port: 8080, GPUs: 2, Role: RolePrefill},
		{Host: "127.0.0.1", Port: 8081, GPUs: 1, Role: RoleDecode},
		{Host: "10.0.0.2", Port: 9000, GPUs: 1, Role: RoleDecode},
	}
}

func TestCommandLines(t *testing.T) {
	base := Spec{Model: "dist/m", ModelLib: "lib.so", Endpoints: threeEndpoints(),
		EngineArgs: []string{"--max-batch-size", "8"}, PrefixCacheMode: PrefixCacheRadix}
	for _, tc := range []struct {
		kind     Kind
		program  string
		args     []string
		i        int
		wantProg string
		want     string
	}{
		{KindMLC, "", nil, 0, "python3",
			"-m mlc_llm serve dist/m --model-lib lib.so --device cuda:0 --enable-debug --mode server --prefix-cache-mode radix --overrides gpu_memory_utilization=0.8 --host 127.0.0.1 --port 8080 --max-batch-size 8"},
		{KindMLC, "/venv/bin/python", nil, 2, "/venv/bin/python",
			"-m mlc_llm serve dist/m --model-lib lib.so --device cuda:3 --enable-debug --mode server --prefix-cache-mode radix --overrides gpu_memory_utilization=0.8 --host 10.0.0.2 --port 9000 --max-batch-size 8"},
		{KindCommand, "/bin/engine", []string{"serve", "-v"}, 1, "/bin/engine",
			"serve -v dist/m --model-lib lib.so --device cuda:2 --enable-debug --mode server --prefix-cache-mode radix --overrides gpu_memory_utilization=0.8 --host 127.0.0.1 --port 8081 --max-batch-size 8"},
		{KindBuiltin, "/usr/bin/caddy", nil, 1, "/usr/bin/caddy",
			"mlc-engine dist/m --model-lib lib.so --device cpu --enable-debug --mode server --prefix-cache-mode radix --host 127.0.0.1 --port 8081 --max-batch-size 8"},
	} {
		s := base
		s.Kind, s.Program, s.Args = tc.kind, tc.program, tc.args
		s = s.Normalize()
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		prog, args := s.Command(tc.i)
		if prog != tc.wantProg || strings.Join(args, " ") != tc.want {
			t.Errorf("%s engine %d:\n got %s %q\nwant %s %q", tc.kind, tc.i, prog, args, tc.wantProg, strings.Fields(tc.want))
		}
	}
}

// The embedding model follows the model library, as MLC's flags do, in
// every kind of engine.
func TestCommandLineEmbeddingModel(t *testing.T) {
	for _, tc := range []struct {
		kind    Kind
		lib     string
		want    string
		notWant string
	}{
		{KindMLC, "e.so", "m --embedding-model dist/e --embedding-model-lib e.so --device cuda:0 ", ""},
		{KindBuiltin, "", "mlc-engine m --embedding-model dist/e --device cpu ", "--embedding-model-lib"},
		{KindBuiltin, "e.so", "mlc-engine m --embedding-model dist/e --embedding-model-lib e.so --device cpu ", ""},
		{KindCommand, "e.so", "run m --embedding-model dist/e --embedding-model-lib e.so --device cuda:0 ", ""},
	} {
		s := Spec{Model: "m", Kind: tc.kind, Program: "p", EmbeddingModel: "dist/e", EmbeddingModelLib: tc.lib,
			Endpoints: []Endpoint{{Host: "h", Port: 1, GPUs: 1}}}
		if tc.kind == KindCommand {
			s.Args = []string{"run"}
		}
		s = s.Normalize()
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		_, args := s.Command(0)
		line := strings.Join(args, " ")
		if !strings.Contains(line, tc.want) || tc.notWant != "" && strings.Contains(line, tc.notWant) {
			t.Errorf("%s: %q, want %q", tc.kind, line, tc.want)
		}
	}
}

func TestCommandLineDefaults(t *testing.T) {
	s := Spec{Model: "m", Kind: KindMLC, Endpoints: []Endpoint{{Host: "h", Port: 1, GPUs: 1}}}.Normalize()
	_, args := s.Command(0)
	if slices.Contains(args, "--model-lib") || slices.Contains(args, "--embedding-model") || !slices.Contains(args, "radix") {
		t.Errorf("args = %q, want no --model-lib, no --embedding-model and the radix prefix cache (mlc_llm serve's default)", args)
	}
}

// envMap parses KEY=VALUE pairs.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestEnv(t *testing.T) {
	uid := []int{1, 2, 255}
	for _, kind := range []Kind{KindBuiltin, KindCommand, KindMLC} {
		s := Spec{Model: "m", Kind: kind, Program: "p", Endpoints: threeEndpoints()}.Normalize()
		for i, wantStart := range []int{0, 2, 3} {
			env, err := s.Env(i, uid)
			if err != nil {
				t.Fatal(err)
			}
			checkEnv(t, envMap(env), kind, uid, 4, wantStart, s.Endpoints)
		}
	}
}

// checkEnv checks the NVSHMEM and peers variables of one engine.
func checkEnv(t *testing.T, env map[string]string, kind Kind, uid []int, npes, peStart int, eps []Endpoint) {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(env[protocol.EnvNVSHMEMConfig]), &cfg); err != nil {
		t.Fatalf("%s: %v", protocol.EnvNVSHMEMConfig, err)
	}
	wantUID := make([]any, len(uid))
	for i, v := range uid {
		wantUID[i] = float64(v)
	}
	want := map[string]any{"uid": wantUID, "npes": float64(npes), "pe_start": float64(peStart)}
	if b1, b2 := mustJSON(cfg), mustJSON(want); b1 != b2 {
		t.Errorf("%s %s = %s, want %s", kind, protocol.EnvNVSHMEMConfig, b1, b2)
	}
	peers, ok := env[protocol.EnvBuiltinPeers]
	if kind == KindMLC {
		if ok {
			t.Errorf("mlc engine got %s", protocol.EnvBuiltinPeers)
		}
		return
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(peers), &got); err != nil {
		t.Fatalf("%s: %v", protocol.EnvBuiltinPeers, err)
	}
	var wantPeers []map[string]any
	start := 0
	for _, ep := range eps {
		wantPeers = append(wantPeers, map[string]any{"pe_start": float64(start), "npes": float64(ep.GPUs), "addr": ep.Addr()})
		start += ep.GPUs
	}
	if b1, b2 := mustJSON(got), mustJSON(wantPeers); b1 != b2 {
		t.Errorf("%s %s = %s, want %s", kind, protocol.EnvBuiltinPeers, b1, b2)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestRandomUID(t *testing.T) {
	a, err := RandomUID{}.UID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomUID{}.UID(t.Context())
	if len(a) != UIDSize || slices.Equal(a, b) {
		t.Fatalf("uid of %d bytes, equal to the next: %v", len(a), slices.Equal(a, b))
	}
	for _, v := range a {
		if v < 0 || v > 255 {
			t.Fatalf("uid byte %d out of range", v)
		}
	}
}
