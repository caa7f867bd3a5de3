package builtin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// shutdownGrace bounds how long a stopping engine waits for responses to
// end.
const shutdownGrace = 10 * time.Second

// Main runs the engine's command line, `<model> [flags]` as `mlc_llm serve`
// takes it, and returns the exit status: 0 after SIGTERM or SIGINT, 2 for a
// bad command line, 1 for other failures.
func Main(args []string) int {
	opts, err := ParseArgs(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mlc-engine: %v\n", err)
		return 2
	}
	if err := serve(opts); err != nil {
		fmt.Fprintf(os.Stderr, "mlc-engine: %v\n", err)
		return 1
	}
	return 0
}

// serve runs the engine until a signal stops it.
func serve(opts *Options) error {
	w, err := loadWorld(os.Getenv)
	if err != nil {
		return err
	}
	e, err := NewEngine(opts, w != nil, os.Stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	engineCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	go e.Run(engineCtx)
	srv := &http.Server{Handler: newServer(e, w).handler(), ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(os.Stderr, "mlc-engine: http: ", 0)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	e.logf("serving %s (%d KV pages of 16, prefix cache %s, disaggregation %v, device %s) on %s",
		opts.Model, e.sched.pool.Pages(), opts.PrefixCacheMode, w != nil, opts.Device, ln.Addr())
	if t := e.timed; t != nil {
		e.logf("timed: %s (%s x%d, %s), time scale %g, KV transfers over %s: no model arithmetic, each step waits its modelled time",
			t.profile.Name, t.profile.GPU.Name, t.profile.TP, t.profile.Model.Name, t.scale, t.link.Name)
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	}
	e.logf("signal received; shutting down")
	return shutdown(srv, e, stopEngine)
}

// shutdown stops accepting, aborts in-flight requests (their responses end
// cleanly) and waits for the handlers.
func shutdown(srv *http.Server, e *Engine, stopEngine context.CancelFunc) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- srv.Shutdown(ctx) }()
	stopEngine()
	<-e.Done()
	if err := <-closed; err != nil {
		_ = srv.Close()
		e.logf("shutdown: %v", err)
	}
	e.logf("stopped")
	return nil
}
