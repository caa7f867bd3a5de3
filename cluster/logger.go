package cluster

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// libraryLog is where go-redis's own messages go (its connection pool's
// retries and reconnections): the latest Conn's log, at Debug, instead of
// the library's default of stderr. The cluster's own Warn and Info say
// what an operator needs.
var (
	libraryLog    atomic.Pointer[zap.Logger]
	libraryLogSet atomic.Bool
)

type libraryLogger struct{}

func (libraryLogger) Printf(_ context.Context, format string, v ...any) {
	if l := libraryLog.Load(); l != nil {
		l.Debug(fmt.Sprintf(format, v...))
	}
}

func setLibraryLogger(l *zap.Logger) {
	libraryLog.Store(l.Named("redis"))
	if libraryLogSet.CompareAndSwap(false, true) {
		redis.SetLogger(libraryLogger{})
	}
}
