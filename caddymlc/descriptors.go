package caddymlc

import (
	"context"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/descriptors"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// descriptorWatches holds the process's one descriptor watch
// (descriptors.Watch), held by the configs that run.
var descriptorWatches = caddy.NewUsagePool()

const descriptorWatchKey = "descriptors"

// holdDescriptorWatch starts the process's watch, or holds the running
// one; releaseDescriptorWatch lets it go (the last holder stops it).
func holdDescriptorWatch(log *zap.Logger) {
	_, _, _ = descriptorWatches.LoadOrNew(descriptorWatchKey, func() (caddy.Destructor, error) {
		ctx, cancel := context.WithCancel(context.Background())
		w := &descriptorWatch{cancel: cancel, done: make(chan struct{})}
		goroutine.Go(log, "descriptor watch", func() {
			defer close(w.done)
			descriptors.Watch(ctx, log)
		}, func(any) { close(w.done) })
		return w, nil
	})
}

func releaseDescriptorWatch() { _, _ = descriptorWatches.Delete(descriptorWatchKey) }

// descriptorWatch is the running watch.
type descriptorWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Destruct stops the watch.
func (w *descriptorWatch) Destruct() error {
	w.cancel()
	<-w.done
	return nil
}
