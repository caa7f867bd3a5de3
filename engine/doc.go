// Package engine runs the fleet of MLC-LLM engines that caddy-mlc routes to.
//
// It is the production counterpart of MLC-LLM's Router.__init__: from a
// [Spec] it computes every endpoint's device range, creates the NVSHMEM
// world (unique id, number of PEs, first PE of each endpoint), starts all
// engines of the world together, waits until each answers GET /v1/models,
// and then supervises them: an engine that dies is restarted with capped
// exponential backoff, external engines are health-checked, and Stop takes
// every process group down, SIGTERM first and SIGKILL after a grace period.
//
// The package does not import Caddy; the Caddy module shares a [Fleet]
// across config reloads by keying it with [Spec.Key].
package engine
