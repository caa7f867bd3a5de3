package caddymlc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/internal/descriptors"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// registerMetrics adds the module's metrics to Caddy's registry, once per
// registry: the routers', the autoscalers', the engines' (GPUs) and the
// process's open descriptors. The cluster's are added by the mlc app when it has one.
func registerMetrics(reg prometheus.Registerer) error {
	for _, register := range []func(prometheus.Registerer) error{router.RegisterMetrics, fleet.RegisterMetrics, engine.RegisterMetrics, descriptors.RegisterMetrics, registerAuthMetrics} {
		if err := register(reg); err != nil {
			return err
		}
	}
	return nil
}
