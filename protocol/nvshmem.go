package protocol

// The NVSHMEM world of an engine, passed in its environment: the contract
// between whoever starts engines (the fleet, or an operator running them
// by hand or for discovery) and the engines themselves.
const (
	// EnvNVSHMEMConfig carries the engine's place in its NVSHMEM world, as
	// MLC-LLM reads it: an NVSHMEMConfig in JSON.
	EnvNVSHMEMConfig = "MLC_NVSHMEM_INIT_CONFIG_JSON_STR"
	// EnvBuiltinPeers carries, for the built-in engine (caddy-mlc's own
	// variable; MLC's engines ignore it), where every PE of the world is
	// reached: a list of Peer in JSON. A real NVSHMEM world needs no
	// addresses; the built-in engine sends KV over HTTP.
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

// Peer is one entry of MLC_BUILTIN_PEERS_JSON: an engine of the world.
type Peer struct {
	// PEStart is the first PE of the engine.
	PEStart int `json:"pe_start"`
	// NPEs is the number of PEs (GPUs) of the engine.
	NPEs int `json:"npes"`
	// Addr is the engine's host:port.
	Addr string `json:"addr"`
}

// Keys of caddy-mlc's extension of query_engine_metrics (see
// SpecialQueryEngineMetrics): the built-in engine reports its place in its
// NVSHMEM world in usage.extra. MLC's engines report none of them.
const (
	// ExtraPEStart is the engine's first PE: the recv_rank of a
	// remote_send to it.
	ExtraPEStart = "pe_start"
	// ExtraNPEs is the number of PEs of the engine's world.
	ExtraNPEs = "npes"
	// ExtraUIDDigest is the hex SHA-256 of the world's NVSHMEM uid (its
	// bytes): engines of one world report the same, without the uid
	// itself being published.
	ExtraUIDDigest = "nvshmem_uid_sha256"
)
