// Package descriptors watches the process's file descriptors: how many
// are open against the soft limit, published and made loud before they
// run out (Caddy cannot answer a client it cannot accept, nor reach an
// engine without one).
package descriptors

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Exhausted reports a call that failed because the process (EMFILE) or
// the system (ENFILE) is out of file descriptors.
func Exhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// The watch samples the open descriptors against the soft limit every
// watchEvery, publishes both (caddy_mlc_open_files,
// caddy_mlc_open_files_limit), and logs a Warn when they cross alarmAt
// of the limit, again only once they fell below rearmAt.
const (
	watchEvery = 2 * time.Second
	alarmAt    = 0.9
	rearmAt    = 0.8
)

// gauges are the watch's metrics, one pair per process.
var gauges = sync.OnceValue(func() [2]prometheus.Gauge {
	const ns, sub = "caddy", "mlc"
	return [2]prometheus.Gauge{
		prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "open_files",
			Help: "File descriptors the process has open (sampled every 2 s)."}),
		prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "open_files_limit",
			Help: "The process's soft limit of open file descriptors (RLIMIT_NOFILE)."}),
	}
})

// RegisterMetrics adds the watch's gauges to a registry (Caddy's), once
// per registry.
func RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range gauges() {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// Watch runs the watch until ctx ends. One runs per process (the adapter
// holds it).
func Watch(ctx context.Context, log *zap.Logger) {
	var alarm alarmState
	g := gauges()
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		open, limit, err := Count()
		switch {
		case errors.Is(err, os.ErrNotExist):
			return // no /proc: nothing to watch here
		case Exhausted(err):
			open = limit // the count itself needs a descriptor
		case err != nil:
			log.Debug("counting open descriptors", zap.Error(err))
		}
		if err == nil || Exhausted(err) {
			g[0].Set(float64(open))
			g[1].Set(float64(limit))
			if alarm.observe(open, limit) {
				log.Warn("open file descriptors near the limit: new clients may not be accepted, and engines not reached; raise the limit (ulimit -n, LimitNOFILE)",
					zap.Int("open", open), zap.Int("limit", limit))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// alarmState says when to warn: crossing the alarm level, once until the
// count falls back below the rearm level.
type alarmState struct{ raised bool }

func (a *alarmState) observe(open, limit int) (warn bool) {
	if limit <= 0 {
		return false
	}
	switch frac := float64(open) / float64(limit); {
	case !a.raised && frac >= alarmAt:
		a.raised = true
		return true
	case a.raised && frac < rearmAt:
		a.raised = false
	}
	return false
}
