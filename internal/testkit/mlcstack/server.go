package mlcstack

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Options configure the MLC servers of Start.
type Options struct {
	// Servers is how many MLC servers to start, each over its own backend.
	Servers int
	// MaxTotalSeqLength is every server's and backend's KV capacity and
	// context length, in tokens (0: ContextWindow). Small values make
	// preemption storms.
	MaxTotalSeqLength int
	// Disaggregation puts the backends in one NVSHMEM world, server i
	// holding PE i (one GPU each, as `endpoint ... gpus 1` in order says):
	// their remote_sends reach each other's KV, and a preempted sequence
	// ends with finish reason "preempt", as in an MLC engine compiled for
	// disaggregation.
	Disaggregation bool
	// PreemptRemoteSends, when positive, has each MLC server preempt every
	// PreemptRemoteSends-th remote_send it gets (nothing computed nor
	// sent, finish reason "preempt"), as KV pressure preempts one on a
	// loaded prefill engine: through MLC's Python front the backends
	// rarely preempt a remote_send by themselves.
	PreemptRemoteSends int
}

// LogsEnv names a directory where Start keeps the servers' and backends'
// logs, exchanges and events (in a new folder per call) instead of a
// test's temporary directory.
const LogsEnv = "CADDY_MLC_MLC_LOGS"

// readyTimeout bounds a server's start: Python imports MLC's serving layer
// (FastAPI, pydantic models, numpy) on a loaded two-core machine.
const readyTimeout = 3 * time.Minute

// Server is an MLC server (`mlc_llm serve` through mlcstandin.serve) and
// the built-in engine behind its stand-in core.
type Server struct {
	URL     string // the MLC server's base URL
	Addr    string // its host:port
	Backend string // the backend's base URL

	mlc, backend *proc
	record       string
	events       string
	generations  string
}

// Start starts opts.Servers MLC servers and their backends, waits until
// all answer, and stops them when tb ends. The backends are the test
// binary as `mlc-engine` (its TestMain must be enginetest.Main).
func (st *Stack) Start(tb testing.TB, opts Options) []*Server {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	capacity := opts.MaxTotalSeqLength
	if capacity == 0 {
		capacity = ContextWindow
	}
	dir := tb.TempDir()
	if keep := os.Getenv(LogsEnv); keep != "" {
		var err error
		if dir, err = os.MkdirTemp(keep, "mlcstack-"); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("mlcstack: logs in %s", dir)
	}
	modelDir := filepath.Join(dir, "model")
	if err := os.Mkdir(modelDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	lib, err := WriteModel(modelDir)
	if err != nil {
		tb.Fatal(err)
	}
	ports := testnet.FreePorts(tb, 2*opts.Servers)
	servers := make([]*Server, opts.Servers)
	var peers []protocol.Peer
	for i := range servers {
		servers[i] = &Server{
			Addr:        fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			Backend:     fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			record:      filepath.Join(dir, fmt.Sprintf("exchanges-%d.jsonl", i)),
			events:      filepath.Join(dir, fmt.Sprintf("events-%d.jsonl", i)),
			generations: filepath.Join(dir, fmt.Sprintf("generations-%d.jsonl", i)),
		}
		servers[i].URL = "http://" + servers[i].Addr
		peers = append(peers, protocol.Peer{PEStart: i, NPEs: 1, Addr: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])})
	}
	overrides := fmt.Sprintf("max_total_seq_length=%d", capacity)
	for i, s := range servers {
		env := os.Environ()
		if opts.Disaggregation {
			cfg, _ := json.Marshal(protocol.NVSHMEMConfig{UID: []int{1, 2, 3, 4}, NPEs: len(servers), PEStart: i})
			pj, _ := json.Marshal(peers)
			env = append(env, protocol.EnvNVSHMEMConfig+"="+string(cfg), protocol.EnvBuiltinPeers+"="+string(pj))
		}
		// MLC never gives a reservation up by itself: neither does the backend.
		s.backend = startProc(tb, fmt.Sprintf("backend %d", i), filepath.Join(dir, fmt.Sprintf("backend-%d.log", i)), env,
			exe, engine.BuiltinSubcommand, "tiny", "--host", "127.0.0.1", "--port", strconv.Itoa(ports[2*i+1]),
			"--enable-debug", "--mode", "server", "--prefix-cache-mode", "radix",
			"--overrides", overrides+";prep_recv_timeout_ms=3600000")
		s.mlc = startProc(tb, fmt.Sprintf("MLC server %d", i), filepath.Join(dir, fmt.Sprintf("mlc-%d.log", i)),
			st.Env([]string{"CADDY_MLC_STANDIN_BACKEND=" + s.Backend, "CADDY_MLC_STANDIN_RECORD=" + s.record,
				"CADDY_MLC_STANDIN_EVENTS=" + s.events, "CADDY_MLC_STANDIN_GENERATIONS=" + s.generations,
				"MLC_LLM_HOME=" + filepath.Join(dir, "mlc-home"),
				"CADDY_MLC_STANDIN_PREEMPT_REMOTE_SEND=" + strconv.Itoa(opts.PreemptRemoteSends)}),
			st.Python, "-m", "mlcstandin.serve", modelDir, "--model-lib", lib, "--device", "cpu", "--mode", "server",
			"--enable-debug", "--host", "127.0.0.1", "--port", strconv.Itoa(ports[2*i]), "--overrides", overrides)
	}
	deadline := time.Now().Add(readyTimeout)
	for _, s := range servers {
		for _, c := range []struct {
			p   *proc
			url string
		}{{s.backend, s.Backend}, {s.mlc, s.URL}} {
			if err := c.p.waitReady(c.url, deadline); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return servers
}

// Exited reports the error of a server or backend process that has ended.
func (s *Server) Exited() error {
	for _, p := range []*proc{s.mlc, s.backend} {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.tail())
		default:
		}
	}
	return nil
}

// Exchange is one HTTP exchange of an MLC server, as mlcstandin.serve
// recorded it: the request and response bodies of errors only.
type Exchange struct {
	Method       string `json:"method"`
	Path         string `json:"path"`
	Status       int    `json:"status"`
	Disconnected bool   `json:"disconnected"` // the client had gone before the answer ended
	Exception    string `json:"exception"`
	Request      string `json:"request"`
	Response     string `json:"response"`
}

// Exchanges returns the server's exchanges so far, in order of their end.
func (s *Server) Exchanges() ([]Exchange, error) { return readLines[Exchange](s.record) }

// Event is something notable MLC's engine does without an error, as the
// stand-in saw it happen (python/mlcstandin/engine.py): kinds
// "remote_send_preempted" (MLC's entrypoint still answers 200 {}),
// "decode_on_missing_kv" (a start_generation on KV no remote_send wrote:
// MLC decodes on whatever the pages hold), "abort_leaks_reservation" (an
// abort after prepare_receive: MLC frees nothing of it) and the harmful
// "kv_write_unreserved" (a remote_send whose KV went to pages the decode
// engine no longer reserved: MLC writes them with one-sided NVSHMEM puts,
// whoever holds them now).
type Event struct {
	Kind    string `json:"kind"`
	Harmful bool   `json:"harmful"`
	Message string `json:"message"`
}

// Events returns the events so far.
func (s *Server) Events() ([]Event, error) { return readLines[Event](s.events) }

// Generation is a generation the server's engine started, as the stand-in
// recorded it: the request's id (MLC's entrypoints take the request's
// user), the disagg kind of the call that started it ("" for a plain
// completion or chat, "start_generation") and the response_format it
// generates under, as MLC's Python passed it to the engine
// (GenerationConfig.model_dump_json(by_alias=True)): null, or
// {"type": ..., "schema": <string or null>}. A start_generation generates
// under its prepare_receive's config, as in MLC (engine.cc
// HandleDisaggRequest): its own response_format is not read.
type Generation struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

// Generations returns the generations so far, in order of their start.
func (s *Server) Generations() ([]Generation, error) { return readLines[Generation](s.generations) }

// readLines reads a file of JSON lines; a missing file has none.
func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// Load is what a backend holds: running and waiting sequences, prep_recv
// reservations and KV pages in use; and how many sequences it preempted
// since it started.
type Load struct {
	Running, Waiting, Prepared, UsedPages int
	Preemptions                           int
}

// Idle reports whether the backend holds nothing.
func (l Load) Idle() bool {
	return l.Running == 0 && l.Waiting == 0 && l.Prepared == 0 && l.UsedPages == 0
}

// BackendLoad reads the backend's /metrics.
func (s *Server) BackendLoad() (Load, error) {
	resp, err := http.Get(s.Backend + "/metrics")
	if err != nil {
		return Load{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Load{}, err
	}
	var l Load
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch name {
		case "mlc_engine_running_requests":
			l.Running = int(v)
		case "mlc_engine_waiting_requests":
			l.Waiting = int(v)
		case "mlc_engine_prepared_requests":
			l.Prepared = int(v)
		case `mlc_engine_kv_pages{state="used"}`:
			l.UsedPages = int(v)
		case "mlc_engine_preemptions_total":
			l.Preemptions = int(v)
		}
	}
	return l, nil
}

// proc is a process of the stack, in a process group of its own.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(tb testing.TB, name, logPath string, env []string, argv ...string) *proc {
	tb.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	p := &proc{name: name, log: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	setGroup(p.cmd)
	if err := p.cmd.Start(); err != nil {
		f.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	tb.Cleanup(func() {
		killGroup(p.cmd)
		<-p.done
		if tb.Failed() {
			tb.Logf("%s (%s), last lines:\n%s", name, logPath, p.tail())
		}
	})
	return p
}

// waitReady polls url/v1/models until it answers 200.
func (p *proc) waitReady(url string, deadline time.Time) error {
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited while starting: %v\n%s", p.name, p.err, p.tail())
		default:
		}
		resp, err := client.Get(url + protocol.PathModels)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer at %s within %v: %v\n%s", p.name, url, readyTimeout, err, p.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail returns the last 60 lines of the process's log, or, when it
// panicked or failed a check, what follows the first such line (up to 300
// lines).
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("panic:")) || bytes.Contains(l, []byte("Check failed")) {
			lines = lines[max(i-20, 0):min(i+300, len(lines))]
			return string(bytes.Join(lines, []byte("\n")))
		}
	}
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
