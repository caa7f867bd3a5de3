package builtin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// proc is an engine process: the test binary re-executed as
// `mlc-engine <model> [flags]`.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	log    strings.Builder
	exited chan struct{}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int { return testnet.FreePort(t) }

// startProc starts an engine process on port with args and env and waits
// for its "serving" log line. At the end of the test it checks that no KV
// page is in use, stops the process with SIGTERM and expects status 0.
func startProc(t *testing.T, port int, env []string, args ...string) *proc {
	t.Helper()
	return startModel(t, TinyModel, port, env, args...)
}

// startModel is startProc for the given model.
func startModel(t *testing.T, model string, port int, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{addr: "127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	all := append([]string{"mlc-engine", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--enable-debug", "--mode", "server"}, args...)
	p.cmd = exec.Command(os.Args[0], all...)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go p.readLog(stderr, ready)
	if !<-ready {
		t.Fatalf("engine on %s did not start:\n%s", p.addr, p.logText())
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// readLog keeps the process's log and reports when it serves.
func (p *proc) readLog(r io.Reader, ready chan<- bool) {
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		p.mu.Lock()
		p.log.WriteString(sc.Text() + "\n")
		p.mu.Unlock()
		if !signalled && strings.Contains(sc.Text(), "serving ") {
			signalled = true
			ready <- true
		}
	}
	_ = p.cmd.Wait()
	if !signalled {
		ready <- false
	}
	close(p.exited)
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// stop checks the pages, sends SIGTERM and waits for status 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	default:
		if used := p.metric(t, `mlc_engine_kv_pages{state="used"}`); used != 0 {
			t.Errorf("engine %s: %d KV pages still used", p.addr, used)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("engine %s exited with %d:\n%s", p.addr, code, p.logText())
	}
}

// metric reads one sample of the engine's /metrics.
func (p *proc) metric(t *testing.T, name string) int {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for line := range strings.SplitSeq(readAll(t, resp), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// url returns the engine's URL for path.
func (p *proc) url(path string) string { return "http://" + p.addr + path }

// startWorld starts n engine processes, one PE each, forming one NVSHMEM
// world.
func startWorld(t *testing.T, n int, args ...string) []*proc {
	t.Helper()
	ports := make([]int, n)
	var peers []map[string]any
	for i := range ports {
		ports[i] = freePort(t)
		peers = append(peers, map[string]any{"pe_start": i, "npes": 1, "addr": fmt.Sprintf("127.0.0.1:%d", ports[i])})
	}
	peersJSON, _ := json.Marshal(peers)
	procs := make([]*proc, n)
	var wg sync.WaitGroup
	for i := range procs {
		env := []string{
			fmt.Sprintf(`%s={"uid":[7,1,2,3],"npes":%d,"pe_start":%d}`, protocol.EnvNVSHMEMConfig, n, i),
			protocol.EnvBuiltinPeers + "=" + string(peersJSON),
		}
		wg.Go(func() { procs[i] = startProc(t, ports[i], env, args...) })
	}
	wg.Wait()
	return procs
}

func TestUnknownFlagExits2(t *testing.T) {
	cmd := exec.Command(os.Args[0], "mlc-engine", "tiny", "--bogus-flag")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("exit %v (%v), want 2:\n%s", cmd.ProcessState, err, out)
	}
	if !strings.Contains(string(out), "bogus-flag") {
		t.Errorf("error does not name the flag:\n%s", out)
	}
}

func TestSIGTERMEndsStreamsAndExits0(t *testing.T) {
	p := startProc(t, freePort(t), nil)
	body := `{"prompt":"the long road","max_tokens":16000,"temperature":0,"stream":true,"debug_config":{"ignore_eos":true}}`
	resp, err := http.Post(p.url("/v1/completions"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("stream broke instead of ending: %v", err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("stream did not end with [DONE]: ...%q", rest[max(0, len(rest)-200):])
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("engine still running 30s after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d:\n%s", code, p.logText())
	}
}
