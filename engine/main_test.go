package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// Environment variables of the test binary re-executed as a fake engine or
// a fake NVSHMEM uid helper.
const (
	envFakeEngine    = "FLEET_TEST_FAKE_ENGINE"     // "1": run the fake engine
	envFakeUIDHelper = "FLEET_TEST_FAKE_UID_HELPER" // "1": run the fake uid helper
	envRecordDir     = "FLEET_TEST_RECORD_DIR"      // where fakes record argv and env
	envBinary        = "FLEET_TEST_BINARY"          // the test binary, for scripts
	envExitPort      = "FLEET_TEST_EXIT_PORT"       // the engine on this port dies at startup
	envHangPort      = "FLEET_TEST_HANG_PORT"       // the engine on this port never gets ready
	envIgnoreTerm    = "FLEET_TEST_IGNORE_TERM"     // "1": engines ignore SIGTERM
	envGrandchild    = "FLEET_TEST_GRANDCHILD"      // "1": engines start a child of their own
	envSpam          = "FLEET_TEST_SPAM"            // "1": engines write 4 MiB before listening
	envImpostorPort  = "FLEET_TEST_IMPOSTOR_PORT"   // the engine on this port is beaten to it
	envImpostor      = "FLEET_TEST_IMPOSTOR"        // "1": run the impostor
	envRealBuiltin   = "FLEET_TEST_REAL_BUILTIN"    // "1": run the real built-in engine
)

// fakeUID is what the fake uid helper prints.
var fakeUID = []int{7, 0, 255, 42}

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envFakeEngine) == "1":
		os.Exit(fakeEngine(os.Args[1:]))
	case os.Getenv(envFakeUIDHelper) == "1":
		os.Exit(fakeUIDHelper(os.Args[1:]))
	case os.Getenv(envImpostor) == "1":
		os.Exit(impostor(os.Args[1:]))
	case os.Getenv(envRealBuiltin) == "1" && len(os.Args) > 1 && os.Args[1] == BuiltinSubcommand:
		os.Exit(builtin.Main(os.Args[2:]))
	}
	// What package builtinkind does in a binary that links the engine
	// (it imports this package, which this package's tests cannot import).
	RegisterKind(KindBuiltin, BuiltinDriver{Limits: builtin.Limits{}})
	os.Exit(m.Run())
}

// record is what a fake process writes about itself.
type record struct {
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// writeRecord writes the process's argv and env to dir/<name>-<pid>.json.
func writeRecord(name string, argv []string) {
	dir := os.Getenv(envRecordDir)
	if dir == "" {
		return
	}
	b, _ := json.Marshal(record{PID: os.Getpid(), Argv: argv, Env: os.Environ()})
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", name, os.Getpid()))
	if err := os.WriteFile(path+".tmp", b, 0o644); err == nil {
		os.Rename(path+".tmp", path)
	}
}

// fakeEngine serves GET /v1/models on --host/--port until killed.
func fakeEngine(args []string) int {
	host, port := flagValue(args, "--host"), flagValue(args, "--port")
	writeRecord("engine-"+port, args)
	if os.Getenv(envIgnoreTerm) == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	if os.Getenv(envGrandchild) == "1" {
		// Same process group; outlives the engine unless the fleet kills it.
		if err := exec.Command("sleep", "600").Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fake engine:", err)
		}
	}
	if os.Getenv(envSpam) == "1" {
		spam()
	}
	if port == os.Getenv(envExitPort) {
		for i := 1; i <= 30; i++ {
			fmt.Fprintf(os.Stderr, "fake engine: dying line %d\n", i)
		}
		return 3
	}
	if port == os.Getenv(envImpostorPort) {
		return beatenToPort(args)
	}
	if port == os.Getenv(envHangPort) {
		fmt.Println("fake engine: hanging")
		time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
		return 1
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake engine:", err)
		return 1
	}
	fmt.Println("fake engine: listening on", ln.Addr())
	http.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"fake"}]}`)
	})
	http.HandleFunc("GET /echo", func(_ http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Query().Get("line")) // output on demand, for the log tests
	})
	fmt.Fprintln(os.Stderr, "fake engine:", http.Serve(ln, nil))
	return 1
}

// beatenToPort is an engine whose port another process takes first: it
// starts an impostor, in a session of its own, that listens on the port
// and kills this engine (SIGTERM) right after answering its first
// readiness probe. The fleet sees the answer while the engine lives, and
// the engine die just after.
func beatenToPort(args []string) int {
	cmd := exec.Command(os.Getenv(envBinary), args...)
	cmd.Env = append(os.Environ(), envImpostor+"=1", envFakeEngine+"=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake engine: impostor:", err)
		return 1
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	fmt.Print("fake engine: impostor says ", line)
	time.Sleep(time.Hour) // until the impostor kills us
	return 1
}

// impostor listens on --host/--port, answers GET /v1/models, and kills its
// parent after the first answer. It records its pid for the test to kill
// it, and exits by itself after a minute.
func impostor(args []string) int {
	writeRecord("impostor-"+flagValue(args, "--port"), args)
	ln, err := net.Listen("tcp", net.JoinHostPort(flagValue(args, "--host"), flagValue(args, "--port")))
	if err != nil {
		fmt.Println("impostor:", err)
		return 1
	}
	parent := os.Getppid()
	var once sync.Once
	fmt.Println("impostor listening")
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"impostor"}]}`)
		w.(http.Flusher).Flush()
		once.Do(func() { syscall.Kill(parent, syscall.SIGTERM) })
	}))
	time.Sleep(time.Minute)
	return 0
}

// spam writes far more than a pipe holds, to both streams, with one line
// longer than maxLogLine: the engine blocks unless the fleet reads it all.
func spam() {
	line := strings.Repeat("y", 1000) + "\n"
	for range 2048 {
		io.WriteString(os.Stdout, line)
		io.WriteString(os.Stderr, line)
	}
	io.WriteString(os.Stdout, strings.Repeat("z", 1<<20)+"\n")
	fmt.Fprintln(os.Stderr, "spam done")
}

// fakeUIDHelper prints fakeUID and waits for stdin to close, like the
// Python helper.
func fakeUIDHelper(args []string) int {
	writeRecord("helper", args)
	b, _ := json.Marshal(fakeUID)
	fmt.Println(string(b))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int { return testnet.FreePort(t) }
