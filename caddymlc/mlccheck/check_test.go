package mlccheck

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// Against built-in engines that --start starts (one prefill engine, two
// decode engines, the prefix cache on), every check passes, the command
// exits 0, its JSON parses, and no engine outlives the run.
func TestBuiltinFleetPasses(t *testing.T) {
	before := enginetest.Children(t)
	ports := testnet.FreePorts(t, 3)
	run := runCheck(t, caddyfile(`
		model tiny
		mode disagg
		prefix_cache radix
		embedding_model tiny-embed name search`,
		fmt.Sprintf("127.0.0.1:%d role prefill", ports[0]),
		fmt.Sprintf("127.0.0.1:%d role decode", ports[1]),
		fmt.Sprintf("127.0.0.1:%d role decode", ports[2])), true)
	if run.status != ExitPassed || run.err != nil {
		t.Fatalf("exit %d (%v), want 0", run.status, run.err)
	}
	if !run.report.OK || run.report.Failed != 0 || run.report.Skipped != 0 || run.report.Passed != len(run.report.Results) {
		t.Fatalf("report: ok %v, %d passed, %d failed, %d skipped of %d", run.report.OK, run.report.Passed, run.report.Failed, run.report.Skipped, len(run.report.Results))
	}
	// Each check ran where it applies: per engine, per pair, per decode
	// engine.
	perEngine := []string{CheckModels, CheckCompletion, CheckCompletionString, CheckContextLength, CheckEmbeddings, CheckNVSHMEMWorld}
	perDecode := []string{CheckKVMetadata, CheckUserIDs, CheckRelease}
	for i, p := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		for _, check := range perEngine {
			if n := len(run.results(check, addr)); n != 1 {
				t.Errorf("%s of %s: %d rows, want 1", check, addr, n)
			}
		}
		if i == 0 {
			continue
		}
		for _, check := range perDecode {
			if n := len(run.results(check, addr)); n != 1 {
				t.Errorf("%s of %s: %d rows, want 1", check, addr, n)
			}
		}
		for _, check := range []string{CheckDisagg, CheckDisaggPrefix} {
			rows := run.results(check, addr)
			if len(rows) != 1 || rows[0].Engines[0] != fmt.Sprintf("127.0.0.1:%d", ports[0]) {
				t.Errorf("%s of the pair to %s: %+v, want one row of the pair from the prefill engine", check, addr, rows)
			}
		}
	}
	// The prefix check sent a part of the window: it matched a prefix
	// and still moved KV.
	for _, r := range run.results(CheckDisaggPrefix, "") {
		if !strings.Contains(r.Reason, "sent") || strings.Contains(r.Reason, "nothing left to send") {
			t.Errorf("prefix check: %q, want a window sent after the matched prefix", r.Reason)
		}
	}
	waitNoChildren(t, before)
	for _, p := range ports {
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
			t.Errorf("port %d still taken after the run: %v", p, err)
		} else {
			l.Close()
		}
	}
}

// A fleet where one engine serves another model fails the models check
// naming that engine, and only that one; the command exits 1 and names it.
func TestOtherModelFails(t *testing.T) {
	ports := testnet.FreePorts(t, 2)
	other, err := filepath.Abs("../../engine/builtin/testdata/spm-mini")
	if err != nil {
		t.Fatal(err)
	}
	handEngine(t, "tiny", ports[0], nil)
	handEngine(t, other, ports[1], nil)
	good, odd := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	run := runCheck(t, caddyfile("model tiny\nmode whole", good+" external", odd+" external"), false)
	if run.status != ExitFailed || run.err == nil || !strings.Contains(run.err.Error(), "models ("+odd+")") {
		t.Fatalf("exit %d (%v), want 1 naming models (%s)", run.status, run.err, odd)
	}
	if rows := run.results(CheckModels, odd); len(rows) != 1 || rows[0].Status != Fail || !strings.Contains(rows[0].Reason, other) {
		t.Fatalf("models of %s: %+v, want a failure naming the model it serves", odd, rows)
	}
	if rows := run.results(CheckModels, good); len(rows) != 1 || rows[0].Status != Pass {
		t.Fatalf("models of %s: %+v, want a pass", good, rows)
	}
	if run.report.OK {
		t.Fatal("report ok with a failed check")
	}
}

// A config with an embedding model, over engines one of which was started
// without it: the embeddings check fails naming that engine, and passes
// the other.
func TestMissingEmbeddingModelFails(t *testing.T) {
	ports := testnet.FreePorts(t, 2)
	handEngine(t, "tiny", ports[0], nil, "--embedding-model", "tiny-embed")
	handEngine(t, "tiny", ports[1], nil)
	good, odd := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	run := runCheck(t, caddyfile("model tiny\nmode whole\nembedding_model tiny-embed", good+" external", odd+" external"), false)
	if run.status != ExitFailed || run.err == nil || !strings.Contains(run.err.Error(), "embeddings ("+odd+")") {
		t.Fatalf("exit %d (%v), want 1 naming embeddings (%s)", run.status, run.err, odd)
	}
	if rows := run.results(CheckEmbeddings, good); len(rows) != 1 || rows[0].Status != Pass || !strings.Contains(rows[0].Reason, "2 vectors") {
		t.Fatalf("embeddings of %s: %+v, want a pass", good, rows)
	}
}

// A decode engine started with a wrong pe_start (it thinks it is PE 0 of
// the world, the config makes it PE 1) fails the world and KV metadata
// checks, naming it; the command exits 1.
func TestWrongPEStartFails(t *testing.T) {
	ports := testnet.FreePorts(t, 2)
	handEngine(t, "tiny", ports[0], worldEnv(ports, 0))
	handEngine(t, "tiny", ports[1], worldEnv(ports, 0)) // should be 1
	prefill, decode := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	run := runCheck(t, caddyfile("model tiny\nmode disagg", prefill+" external", decode+" external"), false)
	if run.status != ExitFailed {
		t.Fatalf("exit %d (%v), want 1", run.status, run.err)
	}
	world := run.results(CheckNVSHMEMWorld, decode)
	if len(world) != 1 || world[0].Status != Fail || !strings.Contains(world[0].Reason, "the config makes it PE 1") {
		t.Fatalf("world of %s: %+v, want a failure saying where the config places it", decode, world)
	}
	meta := run.results(CheckKVMetadata, decode)
	if len(meta) != 1 || meta[0].Status != Fail || !strings.Contains(meta[0].Reason, "recv_rank 1") {
		t.Fatalf("kv_metadata of %s: %+v, want a failure naming recv_rank 1", decode, meta)
	}
	for _, check := range []string{CheckNVSHMEMWorld, CheckKVMetadata} {
		if !strings.Contains(run.err.Error(), check+" ("+decode+")") {
			t.Errorf("the error %q does not name %s of %s", run.err, check, decode)
		}
	}
}

// Engines of two worlds (another uid) fail the world check for the one
// apart; the others pass.
func TestOtherWorldFails(t *testing.T) {
	ports := testnet.FreePorts(t, 3)
	for i, p := range ports {
		env := worldEnv(ports, i)
		if i == 2 {
			env[0] = strings.Replace(env[0], `"uid":[9,8,7,6]`, `"uid":[1,1,1,1]`, 1)
		}
		handEngine(t, "tiny", p, env)
	}
	var eps []string
	for _, p := range ports {
		eps = append(eps, fmt.Sprintf("127.0.0.1:%d external", p))
	}
	run := runCheck(t, caddyfile("model tiny", eps...), false)
	if run.status != ExitFailed {
		t.Fatalf("exit %d (%v), want 1", run.status, run.err)
	}
	for i, p := range ports {
		rows := run.results(CheckNVSHMEMWorld, fmt.Sprintf("127.0.0.1:%d", p))
		want := Pass
		if i == 2 {
			want = Fail
		}
		if len(rows) != 1 || rows[0].Status != want || (want == Fail && !strings.Contains(rows[0].Reason, "uid")) {
			t.Errorf("world of engine %d: %+v, want %s", i, rows, want)
		}
	}
}

// Against engines that are not running, the failure says to start them
// (--start), and does not with --start.
func TestStoppedEnginesHint(t *testing.T) {
	ports := testnet.FreePorts(t, 2)
	path := filepath.Join(t.TempDir(), "Caddyfile")
	cf := caddyfile("model tiny", fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]))
	if err := os.WriteFile(path, []byte(cf), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	status, err := Run(context.Background(), Options{Config: path, Timeout: 10 * time.Second}, &out, zaptest.NewLogger(t))
	if status != ExitFailed || err == nil || !strings.Contains(out.String(), "connection refused") || !strings.Contains(err.Error(), "--start") {
		t.Fatalf("exit %d (%v), want 1 with the --start hint\n%s", status, err, out.String())
	}
	if h := refusedHint(&Report{Results: []Result{{Status: Fail, Reason: "dial tcp: connection refused"}}}, Options{Start: true}); h != "" {
		t.Fatalf("hint %q with --start", h)
	}
}

// --start fails with exit 2, saying why, when a port of an engine is
// taken, and leaves nothing running.
func TestStartPortTaken(t *testing.T) {
	before := enginetest.Children(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	free := testnet.FreePort(t)
	run := runCheck(t, caddyfile("model tiny", fmt.Sprintf("127.0.0.1:%d", free), l.Addr().String()), true)
	if run.status != ExitError || run.err == nil || !strings.Contains(run.err.Error(), l.Addr().String()) {
		t.Fatalf("exit %d (%v), want 2 naming %s", run.status, run.err, l.Addr())
	}
	waitNoChildren(t, before)
}

// When the engines of a second router fail to start (a bad engine
// argument), --start stops those of the first, which had started, and
// exits 2 naming the router.
func TestStartFailureStopsTheRest(t *testing.T) {
	before := enginetest.Children(t)
	ports := testnet.FreePorts(t, 2)
	cf := fmt.Sprintf(`{
	admin off
}
:0 {
	mlc_router {
		model tiny
		mode whole
		endpoint 127.0.0.1:%d
	}
}
:1 {
	mlc_router {
		model tiny
		mode whole
		engine_args --no-such-flag
		endpoint 127.0.0.1:%d
	}
}
`, ports[0], ports[1])
	run := runCheck(t, cf, true)
	if run.status != ExitError || run.err == nil || !strings.Contains(run.err.Error(), "starting its engines") {
		t.Fatalf("exit %d (%v), want 2: starting its engines", run.status, run.err)
	}
	waitNoChildren(t, before)
}

// waitNoChildren waits until the test process has no child process but
// those of before.
func waitNoChildren(t *testing.T, before map[int]bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var left []int
		for pid := range enginetest.Children(t) {
			if !before[pid] {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine processes %v outlived the run", left)
		}
		time.Sleep(50 * time.Millisecond) // polling /proc: nothing to wait on
	}
}
