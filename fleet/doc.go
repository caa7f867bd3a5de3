// Package fleet is the engines' lifecycle: what is done to the engines
// the routers use, beside the requests that run on them. The routers
// (package router) carry out a request; the engines' processes (start,
// supervision, stop, restart) are package engine's; the caddymlc adapter
// only wires this package to the mlc app and the admin API. It imports
// router and is imported by caddymlc only; it holds no process-wide
// state but its Prometheus collectors: a Lifecycle, which the mlc app
// owns beside the routers' router.Live, keeps what must outlive a reload.
//
// Each fleet is a Fleet (fleet.go): its engines' processes (an
// engine.Fleet), the routers' view of them (a router.Pool, which sees the
// processes through router.Processes only), its drain grace, its
// autoscaler (a Scaler) and the operator's drains of its engines. The
// Lifecycle makes them (NewFleet), with the process's engine.Running, so
// that a reload's new fleet waits for the ports an old one holds. It acts
// on the routers through the router.Live and what router exports for it
// (router/fleetapi.go). Its files:
//
//   - lifecycle.go: Lifecycle, made of the live routers (New).
//   - fleet.go: Fleet: its start, the polls and autoscaler ticks of its
//     ready engines, its grace; scaler.go the Scaler and the autoscaling's
//     status.
//   - drain.go: an operator's drain of an engine (Fleet.Drain; by its
//     address, POST /mlc/engines/{addr}/drain, on every live router's
//     engine there): taken out of rotation, its attempts moved to other
//     engines, exactly, when the grace ends; its state and
//     caddy_mlc_engine_drain_state.
//   - status.go: the routers and their engines as operators see them
//     (GET /mlc/engines): the routers' part, and the processes', drains'
//     and autoscalers'.
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
//   - metrics.go: the autoscalers' caddy_mlc_scale_* metrics and the
//     drains' caddy_mlc_engine_drain_state.
package fleet
