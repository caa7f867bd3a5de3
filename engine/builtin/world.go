package builtin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// world is the NVSHMEM world of an engine in disaggregation mode: its own
// PEs and where every PE lives.
type world struct {
	protocol.NVSHMEMConfig
	peers []protocol.Peer
}

// loadWorld reads the world from the environment; it returns nil when the
// engine is not in one.
func loadWorld(getenv func(string) string) (*world, error) {
	cfg := getenv(protocol.EnvNVSHMEMConfig)
	if cfg == "" {
		return nil, nil
	}
	w := &world{}
	if err := json.Unmarshal([]byte(cfg), &w.NVSHMEMConfig); err != nil {
		return nil, fmt.Errorf("%s: %w", protocol.EnvNVSHMEMConfig, err)
	}
	if w.NPEs <= 0 || w.PEStart < 0 || w.PEStart >= w.NPEs {
		return nil, fmt.Errorf("%s: pe_start %d outside a world of %d PEs", protocol.EnvNVSHMEMConfig, w.PEStart, w.NPEs)
	}
	if peers := getenv(protocol.EnvBuiltinPeers); peers != "" {
		if err := json.Unmarshal([]byte(peers), &w.peers); err != nil {
			return nil, fmt.Errorf("%s: %w", protocol.EnvBuiltinPeers, err)
		}
	}
	return w, nil
}

// peerOf returns the endpoint that holds PE rank.
func (w *world) peerOf(rank int) (protocol.Peer, error) {
	if w == nil {
		return protocol.Peer{}, fmt.Errorf("the engine is not in disaggregation mode (no %s)", protocol.EnvNVSHMEMConfig)
	}
	if rank < 0 || rank >= w.NPEs {
		return protocol.Peer{}, fmt.Errorf("recv_rank %d is outside the world of %d PEs", rank, w.NPEs)
	}
	for _, p := range w.peers {
		if rank >= p.PEStart && rank < p.PEStart+max(p.NPEs, 1) {
			return p, nil
		}
	}
	return protocol.Peer{}, fmt.Errorf("no endpoint in %s holds PE %d", protocol.EnvBuiltinPeers, rank)
}

// uidDigest is the hex SHA-256 of the world's uid, one byte per int: what
// the engine reports (protocol.ExtraUIDDigest) so that engines of one
// world can be told from engines started apart.
func (w *world) uidDigest() string {
	b := make([]byte, len(w.UID))
	for i, v := range w.UID {
		b[i] = byte(v)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
