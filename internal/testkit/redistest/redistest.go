// Package redistest starts a test's own redis-server (Debian's package):
// on a free port of 127.0.0.1, with no persistence, stopped when the test
// ends. A test may kill it (SIGKILL, as a crash) and start it again on the
// same port, to see what the cluster does while Redis is away.
//
// Without redis-server on PATH the test is skipped, or fails when
// CADDY_MLC_REQUIRE_REDIS is set (CI sets it: .ci/run installs the
// package).
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// Server is a redis-server a test started.
type Server struct {
	tb   testing.TB
	bin  string
	port int
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd // nil while killed
}

// Start starts a redis-server for tb on a free port, with args added to
// its command line ("--requirepass", "secret"); it is stopped in tb's
// Cleanup.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CADDY_MLC_REQUIRE_REDIS") != "" {
			tb.Fatalf("redis-server not found and CADDY_MLC_REQUIRE_REDIS is set (apt-get install redis-server)")
		}
		tb.Skip("redis-server not found (apt-get install redis-server); set CADDY_MLC_REQUIRE_REDIS=1 to fail instead")
	}
	s := &Server{tb: tb, bin: bin, port: testnet.FreePort(tb), args: args}
	tb.Cleanup(s.Kill)
	s.Restart()
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Kill stops the server at once (SIGKILL) and waits for it to exit; what
// it held is lost. Nothing when it is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server (again, after Kill) on the same port, empty,
// and returns once it accepts connections.
func (s *Server) Restart() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.tb.Fatalf("redis-server on %s already runs", s.Addr())
	}
	// The port may still be in TIME_WAIT from the killed server's clients:
	// redis-server sets SO_REUSEADDR, so it binds all the same.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cmd := exec.Command(s.bin, append([]string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning"}, s.args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			s.tb.Fatal(err)
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			s.tb.Fatalf("starting redis-server: %v", err)
		}
		log := &tail{}
		exited := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				log.add(sc.Text())
			}
			close(exited)
		}()
		if err := waitReady(s.Addr(), s.password(), exited, deadline); err == nil {
			s.cmd = cmd
			return
		} else if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			s.tb.Fatalf("redis-server on %s: %v\n%s", s.Addr(), err, log)
		}
		// It exited (the port not yet free): try again.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// waitReady waits until a PING on addr answers PONG, the process exits,
// or the deadline passes.
func waitReady(addr, password string, exited <-chan struct{}, deadline time.Time) error {
	for {
		if err := ping(addr, password); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited")
		case <-time.After(20 * time.Millisecond): // polling a process we do not control
		}
	}
}

// password is the --requirepass of the server's arguments, if any.
func (s *Server) password() string {
	for i, a := range s.args {
		if a == "--requirepass" && i+1 < len(s.args) {
			return s.args[i+1]
		}
	}
	return ""
}

// ping asks addr for a PING.
func ping(addr, password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// tail keeps the last lines of the server's output, for a failure.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 20 {
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
