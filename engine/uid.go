package engine

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"go.uber.org/zap"
)

// UIDSize is the size in bytes of an NVSHMEM unique id: sizeof
// (nvshmemx_uniqueid_t), a struct of 128 bytes (NVSHMEM_UNIQUEID_LEN).
const UIDSize = 128

// UIDSource makes the NVSHMEM unique id shared by all engines of a fleet.
// A fleet calls UID once when it starts and Close when it stops.
type UIDSource interface {
	// UID returns the unique id, one int (0-255) per byte.
	UID(ctx context.Context) ([]int, error)
	// Close releases what UID needed to keep alive.
	Close() error
}

// RandomUID is a UIDSource of UIDSize random bytes, for engines that only
// need an id shared by the world (the builtin engine).
type RandomUID struct{}

// UID returns UIDSize random bytes.
func (RandomUID) UID(context.Context) ([]int, error) {
	b := make([]byte, UIDSize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("random NVSHMEM uid: %w", err)
	}
	uid := make([]int, len(b))
	for i, c := range b {
		uid[i] = int(c)
	}
	return uid, nil
}

// Close does nothing.
func (RandomUID) Close() error { return nil }

// nvshmemUIDScript asks NVSHMEM for a unique id through TVM, prints it as a
// JSON list of ints, and keeps the process alive until stdin closes: the
// NVSHMEM bootstrap may live in the process that made the id.
const nvshmemUIDScript = `import json, sys
import tvm
uid = tvm.get_global_func("runtime.disco.nvshmem.init_nvshmem_uid")()
print(json.dumps([int(x) for x in uid]), flush=True)
sys.stdin.read()
`

// NVSHMEMHelper is a UIDSource that gets the id from NVSHMEM itself, the
// way MLC's router does, by running `<Python> -c <script>` with TVM. The
// helper process stays alive until Close. If caddy dies, the helper's stdin
// closes too, and Pdeathsig kills it.
type NVSHMEMHelper struct {
	// Python is the interpreter; python3 when empty.
	Python string
	// Logger receives the helper's output.
	Logger *zap.Logger
	// Grace is how long Close waits for the helper to exit by itself.
	Grace time.Duration

	// logs, when set (by a fleet), is used instead of Logger: the fleet's
	// current logger, which Reconfigure may replace while the helper runs.
	logs func() *zap.Logger

	sp      *spawner
	mu      sync.Mutex
	proc    *process
	stdin   *os.File
	closing chan struct{} // closed by Close
}

// UID starts the helper and reads the id from its first line of output.
func (h *NVSHMEMHelper) UID(ctx context.Context) ([]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sp != nil {
		return nil, errors.New("nvshmem uid helper already started")
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("nvshmem uid helper: %w", err)
	}
	first := make(chan string, 1)
	h.sp = newSpawner(h.logger)
	h.closing = make(chan struct{})
	p, err := startProcess(h.sp, procConfig{
		program: orDefault(h.Python, DefaultPython),
		args:    []string{"-c", nvshmemUIDScript},
		stdin:   stdinR,
		logger:  h.outputLogger,
		onStdout: func(line string) {
			select {
			case first <- line:
			default:
			}
		},
	})
	stdinR.Close()
	h.proc, h.stdin = p, stdinW
	if err != nil {
		return nil, fmt.Errorf("nvshmem uid helper: %w", err)
	}
	uid, err := readUID(ctx, p, first)
	if err == nil {
		closing := h.closing
		go goroutine.Call(h.logger, "the NVSHMEM uid helper watcher", func() { h.watch(p, closing) })
	}
	return uid, err
}

// logger returns the helper's logger.
func (h *NVSHMEMHelper) logger() *zap.Logger {
	if h.logs != nil {
		return h.logs()
	}
	return orDefault(h.Logger, zap.NewNop())
}

// outputLogger returns the logger of the helper's output.
func (h *NVSHMEMHelper) outputLogger() *zap.Logger {
	return h.logger().With(zap.String("engine", "nvshmem-uid-helper"))
}

// readUID parses the helper's first stdout line as a JSON int list.
func readUID(ctx context.Context, p *process, first <-chan string) ([]int, error) {
	var line string
	select {
	case line = <-first:
	case <-p.exited:
		err := p.exitError() // waits for the output to drain
		select {
		case line = <-first:
		default:
			return nil, fmt.Errorf("nvshmem uid helper: %w", err)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("nvshmem uid helper: %w", ctx.Err())
	}
	var uid []int
	if err := json.Unmarshal([]byte(line), &uid); err != nil {
		return nil, fmt.Errorf("nvshmem uid helper: bad uid %q: %w", line, err)
	}
	return uid, nil
}

// Close stops the helper: it closes the helper's stdin, waits up to Grace
// for it to exit, then kills its process group.
func (h *NVSHMEMHelper) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sp == nil {
		return nil
	}
	close(h.closing)
	h.stdin.Close()
	if h.proc == nil { // the helper did not start
		h.sp.close()
		h.sp = nil
		return nil
	}
	select {
	case <-h.proc.exited:
	case <-time.After(orDefault(h.Grace, DefaultStopGrace)):
	}
	h.proc.stop(0)
	h.proc = nil
	h.sp.close()
	h.sp = nil
	return nil
}

// watch logs an exit of the helper before Close: the engines keep running,
// but NVSHMEM may have lost its bootstrap. A panic here is logged and
// survived: nothing depends on the watcher.
func (h *NVSHMEMHelper) watch(p *process, closing <-chan struct{}) {
	select {
	case <-p.exited:
		h.logger().Error("nvshmem uid helper exited while the engines run", zap.Error(p.exitError()))
	case <-closing:
	}
}
