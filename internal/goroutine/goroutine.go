// Package goroutine starts the module's own goroutines so that a panic in
// one of them is logged and survived instead of taking Caddy (and every
// engine it runs) down: net/http recovers a handler's panic, but nothing
// recovers a goroutine the handler or the fleet started.
package goroutine

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Go runs fn in a new goroutine. A panic in fn is logged as an error with
// its stack, then onPanic (if not nil) is called with the panic value, on
// that goroutine, to restart or fail what fn was doing.
func Go(log *zap.Logger, what string, fn func(), onPanic func(p any)) {
	go func() {
		defer Recover(log, what, onPanic)
		fn()
	}()
}

// Recover is deferred by a goroutine that was not started with Go. It
// recovers a panic, logs it as an error with its stack, and calls onPanic
// (if not nil) with the panic value.
func Recover(log *zap.Logger, what string, onPanic func(p any)) {
	p := recover()
	if p == nil {
		return
	}
	report(log, what, p)
	if onPanic != nil {
		onPanic(p)
	}
}

// report logs a recovered panic with its stack.
func report(log *zap.Logger, what string, p any) {
	if log == nil {
		log = zap.NewNop()
	}
	log.Error("panic recovered in "+what, zap.String("panic", fmt.Sprint(p)), zap.Stack("stack"))
}

// Call runs fn on the calling goroutine and reports whether it panicked; a
// panic is logged as by Recover, through the logger that log returns at
// that moment. A loop that must keep running for a long time (a
// supervisor, a pipe reader), whose logger may be replaced meanwhile, calls
// it once per attempt and decides itself how to carry on.
func Call(log func() *zap.Logger, what string, fn func()) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			panicked = true
			report(log(), what, p)
		}
	}()
	fn()
	return false
}

// Every runs fn in a new goroutine (as Go) until ctx is done (never once
// it is) or fn panics, then calls done, if not nil. Before each call it
// waits interval(), which it asks anew each time: a reload may change it.
func Every(ctx context.Context, log *zap.Logger, what string, interval func() time.Duration, fn func(), done func()) {
	Go(log, what, func() {
		if done != nil {
			defer done()
		}
		t := time.NewTimer(interval())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if ctx.Err() != nil {
				return
			}
			fn()
			t.Reset(interval())
		}
	}, nil)
}
