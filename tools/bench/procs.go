package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// proc is a child process the bench started: an engine or a Caddy. Its
// output goes to a file in the work directory, whose tail explains a
// failure.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has exited
	waitErr error         // set before exited is closed
}

// procs are the children of the bench, stopped together at the end. The
// bench stops only these, by PID.
type procs struct {
	mu   sync.Mutex
	list []*proc
}

// start runs bin with args, its output into logPath, env added to the
// bench's own environment.
func (ps *procs) start(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	goroutine.Go(logger, "wait for "+name, func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}, nil)
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// last is the child started last.
func (ps *procs) last() *proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.list[len(ps.list)-1]
}

// stopAll stops every child, the last started first (Caddy before the
// engines behind it), each within stopGrace.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the
// exit.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// failure describes a process that exited or never became ready, with
// the last lines of its output.
func (p *proc) failure(what error) error {
	select {
	case <-p.exited:
		what = fmt.Errorf("%w (exited: %v)", what, p.waitErr)
	default:
	}
	return fmt.Errorf("%s: %w; last output (%s):\n%s", p.name, what, p.logPath, p.tail(15))
}

// tail returns the last n lines of the process's output.
func (p *proc) tail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const most = 8 << 10
	if st, err := f.Stat(); err == nil && st.Size() > most {
		_, _ = f.Seek(st.Size()-most, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, most))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return "  " + strings.Join(lines[max(0, len(lines)-n):], "\n  ")
}

// waitReady polls url until it answers 200, the process exits, or
// startTimeout passes.
func (p *proc) waitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	var last error
	for {
		if last = probe(ctx, client, url); last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return p.failure(errors.New("exited before it was ready"))
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return p.failure(fmt.Errorf("not ready after %v: %w", startTimeout, last))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %w", url, answerError(resp))
	}
	return nil
}

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago: all are held open while they are chosen.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
