package engine

import (
	"encoding/json"
	"fmt"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The environment contract of an engine's NVSHMEM world is
// protocol.protocol.EnvNVSHMEMConfig and protocol.protocol.EnvBuiltinPeers.

// Env returns the environment variables, as KEY=VALUE, that engine i of a
// normalized spec gets on top of the fleet's own environment. Every kind
// gets MLC_NVSHMEM_INIT_CONFIG_JSON_STR, and then what its [Driver] adds:
// the builtin and command kinds MLC_BUILTIN_PEERS_JSON (a command may
// wrap the builtin engine, and MLC ignores the variable). Restarts reuse
// the same uid, so a restarted engine rejoins the same world.
func (s Spec) Env(i int, uid []int) ([]string, error) {
	starts := s.DeviceIDStarts()
	cfg, err := json.Marshal(protocol.NVSHMEMConfig{UID: uid, NPEs: starts[len(starts)-1], PEStart: starts[i]})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", protocol.EnvNVSHMEMConfig, err)
	}
	env := []string{protocol.EnvNVSHMEMConfig + "=" + string(cfg)}
	more, err := s.Kind.Driver().Env(s, i)
	if err != nil {
		return nil, err
	}
	return append(env, more...), nil
}

// peersEnv is MLC_BUILTIN_PEERS_JSON: every engine's address and PEs.
func (s Spec) peersEnv() ([]string, error) {
	peers, err := json.Marshal(s.Peers())
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", protocol.EnvBuiltinPeers, err)
	}
	return []string{protocol.EnvBuiltinPeers + "=" + string(peers)}, nil
}

// Peers returns one [protocol.Peer] per endpoint, in order.
func (s Spec) Peers() []protocol.Peer {
	starts := s.DeviceIDStarts()
	peers := make([]protocol.Peer, len(s.Endpoints))
	for i, ep := range s.Endpoints {
		peers[i] = protocol.Peer{PEStart: starts[i], NPEs: ep.GPUs, Addr: ep.Addr()}
	}
	return peers
}
