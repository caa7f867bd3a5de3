package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"go.uber.org/zap"
)

// pipeDrainTimeout bounds how long an exit error waits for the last output
// of a process: a surviving grandchild may hold its pipes open.
const pipeDrainTimeout = time.Second

// procConfig describes a process to start.
type procConfig struct {
	program string
	args    []string
	env     []string // added to os.Environ()
	stdin   io.Reader
	// logger returns the logger of the process's output and goroutines;
	// called anew for every line, so that it may change while the process
	// runs.
	logger func() *zap.Logger
	// onStdout, if set, sees every stdout line after it is logged.
	onStdout func(line string)
}

// process is a started child, leader of its own process group.
type process struct {
	cmd       *exec.Cmd
	pid       int
	tail      *ring
	exited    chan struct{} // closed once the process has been reaped
	waitErr   error         // valid after exited
	pipesDone chan struct{} // closed when both output pipes hit EOF
}

// startProcess starts cfg from the spawner's thread, in a new process group,
// with Pdeathsig SIGKILL, its output logged line by line.
func startProcess(sp *spawner, cfg procConfig) (*process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd := exec.Command(cfg.program, cfg.args...)
	cmd.Env = append(os.Environ(), cfg.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cfg.stdin, outW, errW
	cmd.SysProcAttr = sysProcAttr()
	var startErr error
	if err := sp.do(func() { startErr = cmd.Start() }); err != nil {
		startErr = err
	}
	closeAll(outW, errW) // the child has its copies
	if startErr != nil {
		closeAll(outR, errR)
		return nil, fmt.Errorf("start %s: %w", cfg.program, startErr)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, tail: newRing(tailLines),
		exited: make(chan struct{}), pipesDone: make(chan struct{})}
	p.readOutput(outR, errR, cfg.logger, cfg.onStdout)
	go p.wait(cfg.logger)
	return p, nil
}

// readOutput logs both output streams until EOF, each on its own goroutine
// (see output.pump: a panic there does not stop the draining).
func (p *process) readOutput(outR, errR *os.File, logger func() *zap.Logger, onStdout func(string)) {
	half := make(chan struct{}, 2)
	for _, s := range []struct {
		f      *os.File
		name   string
		onLine func(string)
	}{{outR, "stdout", onStdout}, {errR, "stderr", nil}} {
		o := &output{log: logger, stream: s.name, pid: p.pid, tail: p.tail, onLine: s.onLine}
		go func() {
			defer func() { s.f.Close(); half <- struct{}{} }()
			o.pump(s.f)
		}()
	}
	go func() { <-half; <-half; close(p.pipesDone) }()
}

// wait reaps the process. A panic there (a bug) still closes exited, with
// an error, so that supervision moves on: it kills the group and restarts.
func (p *process) wait(logger func() *zap.Logger) {
	var err error
	if goroutine.Call(logger, "engine process waiter", func() { err = p.cmd.Wait() }) {
		err = errors.New("panic while waiting for the process")
	}
	p.waitErr = err
	close(p.exited)
}

// reaped reports whether the process has exited and been reaped: its PID
// may belong to another process now.
func (p *process) reaped() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the group, then SIGKILL once the leader has exited
// or grace has passed, and waits until the leader is reaped. The final
// SIGKILL also takes down members that outlived the leader.
func (p *process) stop(grace time.Duration) {
	p.signalGroup(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	}
	p.signalGroup(syscall.SIGKILL)
	<-p.exited
}

// exitError describes why the process ended, quoting its last output.
// Call it only after exited is closed.
func (p *process) exitError() error {
	select {
	case <-p.pipesDone:
	case <-time.After(pipeDrainTimeout):
	}
	err := p.waitErr
	if err == nil {
		err = errors.New("exited with status 0")
	}
	return fmt.Errorf("process %d: %w%s", p.pid, err, p.quoteTail())
}

// quoteTail returns the last output lines, indented, for an error message.
func (p *process) quoteTail() string {
	t := p.tail.String()
	if t == "" {
		return " (no output)"
	}
	return "; last output:\n\t" + indent(t)
}

func indent(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		if s[i] == '\n' {
			out = append(out, '\t')
		}
	}
	return string(out)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
