package engine

import (
	"encoding/json"
	"fmt"
)

// Environment variables given to spawned engines.
const (
	// EnvNVSHMEMConfig carries the engine's NVSHMEM world:
	// {"uid": [ints], "npes": <total GPUs>, "pe_start": <first PE>}.
	EnvNVSHMEMConfig = "MLC_NVSHMEM_INIT_CONFIG_JSON_STR"
	// EnvBuiltinPeers carries, for the builtin engine, every endpoint of
	// the world: [{"pe_start": int, "npes": int, "addr": "host:port"}].
	EnvBuiltinPeers = "MLC_BUILTIN_PEERS_JSON"
)

// NVSHMEMConfig is the value of MLC_NVSHMEM_INIT_CONFIG_JSON_STR.
type NVSHMEMConfig struct {
	// UID is the NVSHMEM unique id, one int per byte.
	UID []int `json:"uid"`
	// NPEs is the number of PEs of the world: the GPUs of all endpoints.
	NPEs int `json:"npes"`
	// PEStart is the first PE of this engine.
	PEStart int `json:"pe_start"`
}

// Peer is one entry of MLC_BUILTIN_PEERS_JSON.
type Peer struct {
	// PEStart is the first PE of the endpoint.
	PEStart int `json:"pe_start"`
	// NPEs is the number of PEs (GPUs) of the endpoint.
	NPEs int `json:"npes"`
	// Addr is the endpoint's host:port.
	Addr string `json:"addr"`
}

// Env returns the environment variables, as KEY=VALUE, that engine i of a
// normalized spec gets on top of the fleet's own environment. Every kind
// gets MLC_NVSHMEM_INIT_CONFIG_JSON_STR; the builtin and command kinds
// also get MLC_BUILTIN_PEERS_JSON (a command may wrap the builtin engine,
// and MLC ignores the variable). Restarts reuse the same uid, so a
// restarted engine rejoins the same world.
func (s Spec) Env(i int, uid []int) ([]string, error) {
	starts := s.DeviceIDStarts()
	cfg, err := json.Marshal(NVSHMEMConfig{UID: uid, NPEs: starts[len(starts)-1], PEStart: starts[i]})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", EnvNVSHMEMConfig, err)
	}
	env := []string{EnvNVSHMEMConfig + "=" + string(cfg)}
	if s.Kind == KindMLC {
		return env, nil
	}
	peers, err := json.Marshal(s.Peers())
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", EnvBuiltinPeers, err)
	}
	return append(env, EnvBuiltinPeers+"="+string(peers)), nil
}

// Peers returns one [Peer] per endpoint, in order.
func (s Spec) Peers() []Peer {
	starts := s.DeviceIDStarts()
	peers := make([]Peer, len(s.Endpoints))
	for i, ep := range s.Endpoints {
		peers[i] = Peer{PEStart: starts[i], NPEs: ep.GPUs, Addr: ep.Addr()}
	}
	return peers
}
