// Package fleet is the engines' lifecycle: what is done to the engines
// the routers use, beside the requests that run on them. The routers
// (package router) carry out a request; the engines' processes (start,
// supervision, stop, restart) are package engine's; the caddymlc adapter
// only wires this package to the mlc app and the admin API. It imports
// router and is imported by caddymlc only; it holds no process-wide
// state but its Prometheus collectors: a Lifecycle, which the mlc app
// owns beside the routers' router.Live, keeps what must outlive a reload.
//
// It acts on the routers through Routers (the live routers, a
// router.Live) and what router exports for it (router/fleetapi.go), and
// plugs a fleet's autoscaler into it as a router.Scaler. Its files:
//
//   - lifecycle.go: Lifecycle, made of the live routers (New).
//   - drain.go: an operator's drain of an engine by its address (POST
//     /mlc/engines/{addr}/drain): every live router's engine there is
//     taken out of rotation (router.Upstream.Drain), its attempts moved
//     to other engines, exactly, when the grace ends.
//   - restart.go: a model's rolling restart (POST
//     /mlc/models/{model}/restart): one engine at a time drained,
//     restarted and back in rotation before the next.
//   - retire.go: a fleet no config holds any more after a reload: its
//     streams finish for the grace or move to the new engines, then its
//     engines stop.
//   - scale.go: the scale option's config and the planner, which
//     decides tick by tick, on explicit times, whether a fleet needs an
//     engine more or fewer.
//   - autoscale.go: the autoscaler, which reads a fleet's signals, asks
//     its planner and acts: an engine started (engine.Fleet.StartEngine)
//     or drained then stopped (engine.Fleet.StopEngine).
//   - discovery.go: a router's discovered engines (Discovery, its
//     router.Discovered): the adapter's sources asked, the engines
//     reconciled with their answers, held in the adapter's pool;
//     departed.go: an engine that left its source drains, then is let
//     go, unless it comes back first.
//   - metrics.go: the autoscalers' caddy_mlc_scale_* metrics.
package fleet
