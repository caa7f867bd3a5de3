package caddymlc

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestCaddyfileParses(t *testing.T) {
	d := caddyfile.NewTestDispenser(`mlc_router {
		model tiny
		model_lib lib.so
		mode round-robin
		pd_balance_factor 0.25
		max_prefill_queue 3
		prefix_cache
		engine command /bin/engine --flag x
		engine_args --overrides "max_total_seq_length=512"
		endpoint 127.0.0.1:9001 gpus 2 role prefill
		endpoint [::1]:9002 role decode external
		startup_timeout 30s
		engine_timeout 4s
		prefill_rate 2500
		max_prefill_time 2m
		request_timeout 5m
		keepalive off
		queue_timeout 1m
		queue_size 10
		max_attempts 5
		max_body_size 1MiB
		policy round_robin
	}`)
	var r Handler
	if err := r.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := Handler{ModelConfig: ModelConfig{
		Model: "tiny", ModelLib: "lib.so", Mode: router.ModeWhole, PDBalanceFactor: 0.25,
		MaxPrefillQueue: 3, PrefixCache: "radix",
		Engine:     &EngineProgram{Kind: "command", Command: []string{"/bin/engine", "--flag", "x"}},
		EngineArgs: []string{"--overrides", "max_total_seq_length=512"},
		Endpoints: []engine.Endpoint{
			{Host: "127.0.0.1", Port: 9001, GPUs: 2, Role: "prefill"},
			{Host: "::1", Port: 9002, GPUs: 1, Role: "decode", External: true},
		},
		StartupTimeout: 30e9, EngineTimeout: 4e9, QueueTimeout: 60e9, QueueSize: 10, MaxAttempts: 5, MaxBodySize: 1 << 20,
		PrefillRate: 2500, MaxPrefillTime: 120e9, RequestTimeout: 300e9, KeepAlive: -1,
		PolicyRaw: json.RawMessage(`{"policy":"round_robin"}`),
	}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got  %+v\nwant %+v", r, want)
	}
}

func TestCaddyfileErrors(t *testing.T) {
	cases := []struct {
		name, body, want string
		line             int
	}{
		{"unknown", "model tiny\n\tbogus 1", `unknown subdirective "bogus"`, 3},
		{"no model", "mode disagg\nendpoint a:1\nendpoint a:2", "model is required", 1},
		{"bad mode", "model tiny\nmode fast", `mode "fast"`, 3},
		{"balance range", "model tiny\npd_balance_factor 1", "pd_balance_factor 1: want a number in [0, 1)", 3},
		{"balance negative", "model tiny\npd_balance_factor -0.1", "[0, 1)", 3},
		{"balance nan", "model tiny\npd_balance_factor x", "not a number", 3},
		{"prefill queue zero", "model tiny\nmax_prefill_queue 0", `max_prefill_queue "0": want an integer of at least 1, or off`, 3},
		{"prefill queue word", "model tiny\nmax_prefill_queue never", `max_prefill_queue "never"`, 3},
		{"prefix cache", "model tiny\nprefix_cache lru", `prefix_cache "lru"`, 3},
		{"engine kind", "model tiny\nengine docker", `engine "docker"`, 3},
		{"engine command empty", "model tiny\nengine command", "needs a program", 3},
		{"engine builtin args", "model tiny\nengine builtin x", "takes no command", 3},
		{"engine_args empty", "model tiny\nengine_args", "wrong argument count", 3},
		{"duplicate endpoint", "model tiny\nendpoint 127.0.0.1:1\nendpoint 127.0.0.1:1", "endpoint 127.0.0.1:1 given twice", 4},
		{"endpoint no port", "model tiny\nendpoint localhost", "want host:port", 3},
		{"endpoint bad port", "model tiny\nendpoint localhost:99999", "port must be", 3},
		{"gpus zero", "model tiny\nendpoint a:1 gpus 0", `gpus "0"`, 3},
		{"gpus missing", "model tiny\nendpoint a:1 gpus", "wrong argument count", 3},
		{"role", "model tiny\nendpoint a:1 role both", `role "both"`, 3},
		{"endpoint option", "model tiny\nendpoint a:1 weight 3", `endpoint option "weight"`, 3},
		{"disagg one endpoint", "model tiny\nendpoint a:1", "needs an endpoint that can decode", 1},
		{"disagg default endpoint", "model tiny", "needs an endpoint that can decode", 1},
		{"disagg no prefill", "model tiny\nendpoint a:1 role decode\nendpoint a:2 role decode", "can prefill", 1},
		{"bad duration", "model tiny\nstartup_timeout soon", `startup_timeout "soon"`, 3},
		{"zero duration", "model tiny\nstartup_timeout 0s", "must be positive", 3},
		{"attempts", "model tiny\nmax_attempts 0", `max_attempts "0"`, 3},
		{"engine timeout", "model tiny\nengine_timeout -1s", `engine_timeout "-1s": must be positive`, 3},
		{"queue timeout", "model tiny\nqueue_timeout later", `queue_timeout "later"`, 3},
		{"prefill rate", "model tiny\nprefill_rate fast", `prefill_rate "fast": want prompt tokens a second`, 3},
		{"keepalive", "model tiny\nkeepalive never", `keepalive "never"`, 3},
		{"queue size", "model tiny\nqueue_size 0", `queue_size "0": want an integer`, 3},
		{"body size", "model tiny\nmax_body_size lots", `max_body_size "lots"`, 3},
		{"twice", "model tiny\nmodel other", "model given twice", 3},
		{"models share an endpoint", "model a {\nendpoint h:1 role any\n}\nmodel b {\nendpoint h:2 role any\nendpoint h:1 role any\n}", "model b (line 5): endpoint h:1 is model a's too", 8},
		{"model block twice", "model a {\nendpoint h:1 role any\n}\nmodel a {\nendpoint h:2 role any\n}", "model a given twice", 7},
		{"model block and single", "model tiny\nmodel a {\nendpoint h:1 role any\n}", "with model blocks, name every model in its own block", 1},
		{"two defaults", "model a {\nendpoint h:1 role any\ndefault\n}\nmodel b {\nendpoint h:2 role any\ndefault\n}", "more than one model is marked default", 1},
		{"health uri", "model tiny\nhealth_uri healthz", `health_uri "healthz": want a path`, 3},
		{"embedding model lib", "model tiny\nembedding_model e lib x", "want model_lib <lib> or name <name> after the path", 3},
		{"embedding model name twice", "model tiny\nembedding_model e name x name y", "name takes one value, once", 3},
		{"embedding model named as a model", "model a {\nendpoint h:1 role any\nembedding_model e name b\n}\nmodel b {\nendpoint h:2 role any\n}", "the embedding model of a is named b, as is a model of b", 1},
		{"policy unknown", "model tiny\npolicy fastest", `policy "fastest": no selection policy of that name (module http.handlers.mlc_router.selection_policies.fastest)`, 3},
		{"policy args", "model tiny\npolicy least_loaded 2", "wrong argument count", 3},
		{"policy missing", "model tiny\npolicy", "wrong argument count", 3},
		{"policy twice", "model tiny\npolicy least_loaded\npolicy round_robin", "policy given twice", 4},
		{"extra arg", "model tiny extra", "wrong argument count", 2},
		{"duration with a space", "model tiny\nengine_timeout 15 s", "engine_timeout 15 s: write a duration as one word, without spaces: engine_timeout 15s", 3},
		{"duration words", "model tiny\nqueue_timeout 15 seconds", "queue_timeout: want one duration, such as 15s", 3},
		{"unknown did you mean", "model tiny\nendpont 127.0.0.1:1", `unknown subdirective "endpont" (did you mean "endpoint"?); the options: `, 3},
		{"unknown lists", "model tiny\nbogus 1", "the options: body_timeout, budget, ", 3},
		{"unknown in a model block", "model a {\n\tendpont h:1\n}", `(did you mean "endpoint"?)`, 3},
		{"policy did you mean", "model tiny\npolicy leastloaded", `(did you mean "least_loaded"?); the policies of this Caddy: `, 3},
		{"mode did you mean", "model tiny\nmode disag", `mode "disag": want disagg or whole (round_robin, MLC's round-robin) (did you mean "disagg"?)`, 3},
		{"role did you mean", "model tiny\nendpoint a:1 role decod", `role "decod": want one of prefill, decode, any (did you mean "decode"?)`, 3},
		{"tenant not a placeholder", "model tiny\ntenant X-Api-Key", `tenant "X-Api-Key": want a placeholder, read from each request, such as {http.request.header.X-Api-Key}`, 3},
		{"priority not a placeholder", "model tiny\npriority high", `{http.request.header.high}`, 3},
		{"unknown built-in model", "model tinny\nmode whole\nendpoint a:1", `model tinny: the built-in engine loads "tiny" or a model directory holding tokenizer.json, and "tinny" is neither (did you mean "tiny"?)`, 2},
		{"unknown built-in model in a block", "model a {\npath tiny\nendpoint h:1 role any\n}\nmodel b {\npath nowhere\nendpoint h:2 role any\n}", `model b: the built-in engine loads "tiny"`, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser("mlc_router {\n" + c.body + "\n}")
			var r Handler
			err := r.UnmarshalCaddyfile(d)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
			if wantAt := "Testfile:" + itoa(c.line); !strings.Contains(err.Error(), wantAt) {
				t.Fatalf("error %q does not point at line %d", err, c.line)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestDirectiveArgumentsRejected(t *testing.T) {
	var r Handler
	if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router tiny {\nmodel tiny\n}")); err == nil {
		t.Fatal("argument on the directive line accepted")
	}
}

func TestSplitRoles(t *testing.T) {
	eps := func(roles ...string) []engine.Endpoint {
		var out []engine.Endpoint
		for i, r := range roles {
			out = append(out, engine.Endpoint{Host: "h", Port: i + 1, GPUs: 1, Role: r})
		}
		return out
	}
	cases := []struct {
		roles           []string
		prefill, decode []int
	}{
		{[]string{"", "", ""}, []int{0}, []int{1, 2}},
		{[]string{"decode", "prefill", ""}, []int{1, 2}, []int{0, 2}},
		{[]string{"any"}, []int{0}, []int{0}},
		{[]string{"prefill", "prefill", "decode"}, []int{0, 1}, []int{2}},
	}
	for _, c := range cases {
		p, d, err := router.SplitRoles(eps(c.roles...))
		if err != nil || !reflect.DeepEqual(p, c.prefill) || !reflect.DeepEqual(d, c.decode) {
			t.Fatalf("%q: prefill %v decode %v err %v", c.roles, p, d, err)
		}
	}
}

func TestJSONValidate(t *testing.T) {
	good := ModelConfig{Model: "tiny", Endpoints: []engine.Endpoint{{Host: "h", Port: 1}, {Host: "h", Port: 2}}}
	if err := (&Handler{ModelConfig: good}).Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]ModelConfig{
		"model":         {Endpoints: good.Endpoints},
		"mode":          {Model: "m", Mode: "x", Endpoints: good.Endpoints},
		"balance":       {Model: "m", PDBalanceFactor: 1.5, Endpoints: good.Endpoints},
		"prefill queue": {Model: "m", MaxPrefillQueue: -2, Endpoints: good.Endpoints},
		"duplicate":     {Model: "m", Endpoints: []engine.Endpoint{{Host: "h", Port: 1}, {Host: "h", Port: 1}}},
		"gpus":          {Model: "m", Endpoints: []engine.Endpoint{{Host: "h", Port: 1, GPUs: -1}, {Host: "h", Port: 2}}},
		"attempts":      {Model: "m", MaxAttempts: -1, Endpoints: good.Endpoints},
		"engine":        {Model: "m", Engine: &EngineProgram{Kind: "x"}, Endpoints: good.Endpoints},
	} {
		if err := (&Handler{ModelConfig: bad}).Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestAdaptExamples adapts every Caddyfile of the project and compares the
// JSON with the golden file beside it (go test -update rewrites them). An
// example with a package of its own (examples/<name>/, a module this
// package's tests cannot import) is checked by that package's tests.
func TestAdaptExamples(t *testing.T) {
	var files []string
	all, _ := filepath.Glob("../examples/*.Caddyfile")
	for _, f := range all {
		if fi, err := os.Stat(strings.TrimSuffix(f, ".Caddyfile")); err == nil && fi.IsDir() {
			continue
		}
		files = append(files, f)
	}
	files = append(files, "../Caddyfile")
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, warnings, err := adapter.Adapt(src, map[string]any{"filename": f})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range warnings {
				t.Errorf("warning: %s", w.Message)
			}
			var pretty map[string]any
			if err := json.Unmarshal(out, &pretty); err != nil {
				t.Fatal(err)
			}
			got, _ := json.MarshalIndent(pretty, "", "\t")
			got = append(got, '\n')
			golden := strings.TrimSuffix(f, ".Caddyfile") + ".json"
			if filepath.Base(f) == "Caddyfile" {
				golden = "../examples/main.json"
			}
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./caddymlc -run TestAdaptExamples -update)", err)
			}
			if string(got) != string(want) {
				t.Fatalf("adapted JSON differs from %s:\n%s", golden, got)
			}
		})
	}
}
