// Package goroutine starts the module's own goroutines so that a panic in
// one of them is logged and survived instead of taking Caddy (and every
// engine it runs) down: net/http recovers a handler's panic, but nothing
// recovers a goroutine the handler or the fleet started.
package goroutine

import (
	"fmt"

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
	if log == nil {
		log = zap.NewNop()
	}
	log.Error("panic recovered in "+what, zap.String("panic", fmt.Sprint(p)), zap.Stack("stack"))
	if onPanic != nil {
		onPanic(p)
	}
}
