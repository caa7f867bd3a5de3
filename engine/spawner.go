package engine

import (
	"errors"
	"runtime"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"go.uber.org/zap"
)

// errSpawnerClosed is returned when a process is started after Stop.
var errSpawnerClosed = errors.New("engine fleet is stopping")

// spawner starts processes from one dedicated OS thread.
//
// On Linux, PR_SET_PDEATHSIG (SysProcAttr.Pdeathsig) fires when the
// *thread* that forked the child exits, not when the process does
// (prctl(2); Go issue 27505). The Go runtime terminates a thread when a
// goroutine locked to it returns without unlocking, so a child forked from
// an arbitrary goroutine could be killed long before caddy exits. Every
// fork of a fleet therefore happens on the thread of a goroutine that holds
// runtime.LockOSThread and lives until all the fleet's processes are dead.
// When caddy dies, that thread dies with it and the kernel kills the
// children.
//
// For the same reason a panic must never unwind the spawner's goroutine:
// the runtime would end the thread and the kernel would kill every engine.
// Each closure runs under its own recover; a panic is logged and returned
// by do as an error, and the thread keeps serving.
type spawner struct {
	log  func() *zap.Logger
	reqs chan func()
	quit chan struct{}
	done chan struct{}
}

// newSpawner starts the spawner's locked goroutine; log is where panics
// of its closures are logged.
func newSpawner(log func() *zap.Logger) *spawner {
	s := &spawner{log: log, reqs: make(chan func()), quit: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	// Never unlocked: when loop returns, the runtime ends the thread, which
	// is what we want once every child is gone.
	runtime.LockOSThread()
	defer close(s.done)
	for {
		select {
		case f := <-s.reqs:
			f()
		case <-s.quit:
			return
		}
	}
}

// do runs f on the spawner's thread and waits for it. It returns an error
// when the spawner is closed or f panicked.
func (s *spawner) do(f func()) error {
	ran := make(chan error, 1)
	req := func() {
		var err error
		if goroutine.Call(s.log, "the engine spawner thread", f) {
			err = errors.New("panic on the engine spawner thread")
		}
		ran <- err
	}
	select {
	case s.reqs <- req:
		return <-ran
	case <-s.quit:
		return errSpawnerClosed
	}
}

// close ends the spawner's thread. Call it only after every process it
// started has exited.
func (s *spawner) close() {
	close(s.quit)
	<-s.done
}
