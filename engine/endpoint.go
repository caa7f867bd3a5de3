package engine

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Engine roles an endpoint may declare. The router uses them to choose
// prefill and decode engines; the fleet only validates them.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleAny     = "any"
)

// ErrInvalidSpec is wrapped by every error that rejects a fleet
// specification or one of its endpoints.
var ErrInvalidSpec = errors.New("invalid engine fleet spec")

// Endpoint is one engine of the fleet: where it listens, how many GPUs it
// owns (its share of the NVSHMEM world) and what it is used for.
type Endpoint struct {
	// Host is the address the engine listens on and is reached at.
	Host string `json:"host"`
	// Port is the engine's TCP port.
	Port int `json:"port"`
	// GPUs is the number of GPUs (NVSHMEM PEs) of this engine; at least 1.
	GPUs int `json:"gpus"`
	// Role is "prefill", "decode" or "any" (the default when empty).
	Role string `json:"role,omitempty"`
	// External marks an engine that someone else runs: the fleet never
	// spawns it, it only health-checks it. It still counts in the world.
	External bool `json:"external,omitempty"`
}

// Addr returns host:port, the endpoint's name in logs and errors.
func (e Endpoint) Addr() string {
	return net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}

// URL returns the endpoint's base URL, without a trailing slash.
func (e Endpoint) URL() string {
	return "http://" + e.Addr()
}

// DeviceIDStarts returns the running sum of gpus starting at 0, with the
// total last: engine i uses devices [starts[i], starts[i+1]) and its first
// NVSHMEM PE is starts[i]. [1,1] gives [0,1,2]; [2,2,2] gives [0,2,4,6].
func DeviceIDStarts(gpus []int) []int {
	starts := make([]int, len(gpus)+1)
	for i, n := range gpus {
		starts[i+1] = starts[i] + n
	}
	return starts
}

// endpointGPUs returns the GPU count of each endpoint.
func endpointGPUs(eps []Endpoint) []int {
	gpus := make([]int, len(eps))
	for i, ep := range eps {
		gpus[i] = ep.GPUs
	}
	return gpus
}

// ParseAddr splits an endpoint's address, host:port, as a config
// writes it: a host, and a port in 1..65535.
func ParseAddr(s string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("endpoint %q: want host:port: %w", s, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("endpoint %q: port must be a number in 1..65535", s)
	}
	if host == "" {
		return "", 0, fmt.Errorf("endpoint %q: missing host", s)
	}
	return host, port, nil
}

// ValidateEndpoints checks that there is at least one endpoint, that every
// endpoint has a host, a port in 1..65535, at least one GPU and a known
// role, and that no two endpoints are one listening address: neither the
// same host:port nor aliases of it (localhost and 127.0.0.1, 0.0.0.0 and
// any host, on the same port), which it resolves the hosts of endpoints
// that share a port to find. Errors wrap [ErrInvalidSpec].
func ValidateEndpoints(eps []Endpoint) error {
	if len(eps) == 0 {
		return fmt.Errorf("%w: no endpoints", ErrInvalidSpec)
	}
	seen := make(map[string]int, len(eps))
	for i, ep := range eps {
		if err := ep.validate(); err != nil {
			return fmt.Errorf("endpoint %d: %w", i, err)
		}
		if j, dup := seen[ep.Addr()]; dup {
			return fmt.Errorf("%w: endpoints %d and %d both use %s", ErrInvalidSpec, j, i, ep.Addr())
		}
		seen[ep.Addr()] = i
	}
	return checkAliases(eps)
}

func (e Endpoint) validate() error {
	switch {
	case e.Host == "":
		return fmt.Errorf("%w: empty host", ErrInvalidSpec)
	case e.Port < 1 || e.Port > 65535:
		return fmt.Errorf("%w: %s: port %d out of range 1-65535", ErrInvalidSpec, e.Addr(), e.Port)
	case e.GPUs < 1:
		return fmt.Errorf("%w: %s: gpus must be at least 1, got %d", ErrInvalidSpec, e.Addr(), e.GPUs)
	}
	switch e.Role {
	case "", RolePrefill, RoleDecode, RoleAny:
		return nil
	}
	return fmt.Errorf("%w: %s: unknown role %q (want prefill, decode or any)", ErrInvalidSpec, e.Addr(), e.Role)
}

// Spawned returns the indexes of the endpoints a fleet runs itself (not
// External), in endpoint order.
func Spawned(eps []Endpoint) []int {
	var out []int
	for i, ep := range eps {
		if !ep.External {
			out = append(out, i)
		}
	}
	return out
}
