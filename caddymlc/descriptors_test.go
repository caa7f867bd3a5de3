package caddymlc

import (
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/descriptors"
)

// A running config publishes the process's open descriptors and limit.
func TestDescriptorWatchPublishes(t *testing.T) {
	open, limit, err := descriptors.Count()
	if err != nil {
		t.Skipf("no descriptor count here: %v", err)
	}
	startSite(t, 2, "\t\t\tmode whole\n")
	waitFor(t, "the descriptor watch to publish", func() bool {
		return metricValue(t, "caddy_mlc_open_files_limit") == float64(limit) && metricValue(t, "caddy_mlc_open_files") > 0
	})
	if got := metricValue(t, "caddy_mlc_open_files"); got < float64(open)/2 {
		t.Errorf("open_files %v, this process has %d open", got, open)
	}
}
