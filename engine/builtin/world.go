package builtin

import (
	"encoding/json"
	"fmt"
)

// Environment variables that put the engine in an NVSHMEM world, as the
// fleet sets them.
const (
	EnvNVSHMEMConfig = "MLC_NVSHMEM_INIT_CONFIG_JSON_STR"
	EnvBuiltinPeers  = "MLC_BUILTIN_PEERS_JSON"
)

// world is the NVSHMEM world of an engine in disaggregation mode: its own
// PEs and where every PE lives.
type world struct {
	NPEs    int   `json:"npes"`
	PEStart int   `json:"pe_start"`
	UID     []int `json:"uid"`
	peers   []peer
}

// peer is one endpoint of the world.
type peer struct {
	PEStart int    `json:"pe_start"`
	NPEs    int    `json:"npes"`
	Addr    string `json:"addr"`
}

// loadWorld reads the world from the environment; it returns nil when the
// engine is not in one.
func loadWorld(getenv func(string) string) (*world, error) {
	cfg := getenv(EnvNVSHMEMConfig)
	if cfg == "" {
		return nil, nil
	}
	w := &world{}
	if err := json.Unmarshal([]byte(cfg), w); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvNVSHMEMConfig, err)
	}
	if w.NPEs <= 0 || w.PEStart < 0 || w.PEStart >= w.NPEs {
		return nil, fmt.Errorf("%s: pe_start %d outside a world of %d PEs", EnvNVSHMEMConfig, w.PEStart, w.NPEs)
	}
	if peers := getenv(EnvBuiltinPeers); peers != "" {
		if err := json.Unmarshal([]byte(peers), &w.peers); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvBuiltinPeers, err)
		}
	}
	return w, nil
}

// peerOf returns the endpoint that holds PE rank.
func (w *world) peerOf(rank int) (peer, error) {
	if w == nil {
		return peer{}, fmt.Errorf("the engine is not in disaggregation mode (no %s)", EnvNVSHMEMConfig)
	}
	if rank < 0 || rank >= w.NPEs {
		return peer{}, fmt.Errorf("recv_rank %d is outside the world of %d PEs", rank, w.NPEs)
	}
	for _, p := range w.peers {
		if rank >= p.PEStart && rank < p.PEStart+max(p.NPEs, 1) {
			return p, nil
		}
	}
	return peer{}, fmt.Errorf("no endpoint in %s holds PE %d", EnvBuiltinPeers, rank)
}
