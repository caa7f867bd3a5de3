package protocol

// Paths of the microserving endpoints every engine serves (MLC-LLM's
// microserving_entrypoints.py), all under PathMicroserving; PathRelease,
// our extension, is below.
const (
	PathMicroserving  = "/microserving/"
	PathPrepRecv      = PathMicroserving + "prep_recv"
	PathRemoteSend    = PathMicroserving + "remote_send"
	PathStartGenerate = PathMicroserving + "start_generate"
)

// PrepRecvRequest asks the decode engine to match the prompt against its
// prefix cache and allocate KV entries for the rest of [0, End).
type PrepRecvRequest struct {
	CompletionRequest
	// End bounds the KV window; -1 means len(prompt)-1.
	End int `json:"end"`
}

// MarshalJSON writes the completion request with "end".
func (r PrepRecvRequest) MarshalJSON() ([]byte, error) {
	return r.CompletionRequest.marshalWith(prepRecvFields{r.End})
}

// UnmarshalJSON reads the completion request and "end".
func (r *PrepRecvRequest) UnmarshalJSON(b []byte) error {
	if err := r.CompletionRequest.UnmarshalJSON(b); err != nil {
		return err
	}
	f := prepRecvFields{End: -1}
	err := takeFields(b, &f, r.Extra)
	r.End = f.End
	return err
}

type prepRecvFields struct {
	End int `json:"end"`
}

// PrepRecvResponse is prep_recv's answer.
type PrepRecvResponse struct {
	// KVAppendMetadata says where the decode engine's KV entries are (see
	// KVAppendMetadata); the prefill engine writes there.
	KVAppendMetadata string `json:"kv_append_metadata"`
	// PrefixMatchedLength is how many prompt tokens the decode engine
	// already holds in its prefix cache.
	PrefixMatchedLength int `json:"prefix_matched_length"`
}

// RemoteSendRequest asks the prefill engine to compute the KV of the prompt
// window [Begin, End) and write it into the decode engine's memory.
type RemoteSendRequest struct {
	CompletionRequest
	Begin int `json:"begin"`
	End   int `json:"end"`
	// KVAddrInfo is the metadata prep_recv answered.
	KVAddrInfo string `json:"kv_addr_info"`
	// RecvRank is the first PE of the decode endpoint.
	RecvRank int `json:"recv_rank"`
}

type remoteSendFields struct {
	Begin      int    `json:"begin"`
	End        int    `json:"end"`
	KVAddrInfo string `json:"kv_addr_info"`
	RecvRank   int    `json:"recv_rank"`
}

// MarshalJSON writes the completion request with the remote_send fields.
func (r RemoteSendRequest) MarshalJSON() ([]byte, error) {
	return r.CompletionRequest.marshalWith(remoteSendFields{r.Begin, r.End, r.KVAddrInfo, r.RecvRank})
}

// UnmarshalJSON reads the completion request and the remote_send fields.
func (r *RemoteSendRequest) UnmarshalJSON(b []byte) error {
	if err := r.CompletionRequest.UnmarshalJSON(b); err != nil {
		return err
	}
	var f remoteSendFields
	err := takeFields(b, &f, r.Extra)
	r.Begin, r.End, r.KVAddrInfo, r.RecvRank = f.Begin, f.End, f.KVAddrInfo, f.RecvRank
	return err
}

// Completion returns the remote_send as the completion MLC's entrypoint
// makes of it: the request with debug_config.disagg_config of kind
// remote_send, whole. An engine started with --enable-debug runs it from
// POST /v1/completions as from the entrypoint, and answers the
// completion, whose finish_reason "preempt" tells a send the engine
// preempted: MLC's entrypoint answers {} either way.
func (r RemoteSendRequest) Completion() CompletionRequest {
	c := r.CompletionRequest
	begin, end, rank := r.Begin, r.End, r.RecvRank
	c.DebugConfig = &DebugConfig{DisaggConfig: &DisaggConfig{Kind: DisaggRemoteSend, KVAppendMetadata: r.KVAddrInfo,
		KVWindowBegin: &begin, KVWindowEnd: &end, DstGroupOffset: &rank}}
	c.Stream, c.StreamOptions = false, nil
	return c
}

// RemoteSendResponse is remote_send's answer: `{}` from MLC's engines.
// KVBytes is caddy-mlc's extension, from the built-in engine: the bytes
// of keys and values it sent, for the router's metrics.
type RemoteSendResponse struct {
	KVBytes int64 `json:"kv_bytes,omitempty"`
}

// ExtraKVBytes is the key of usage.extra under which the built-in
// engine's remote_send, called as a completion, reports the bytes it sent
// (RemoteSendResponse.KVBytes's field, as a usage figure).
const ExtraKVBytes = "kv_bytes"

// StartGenerateRequest asks the decode engine to prefill the prompt window
// [Begin, len(prompt)) locally and then decode.
type StartGenerateRequest struct {
	CompletionRequest
	Begin int `json:"begin"`
}

// MarshalJSON writes the completion request with "begin".
func (r StartGenerateRequest) MarshalJSON() ([]byte, error) {
	return r.CompletionRequest.marshalWith(startGenerateFields{r.Begin})
}

// UnmarshalJSON reads the completion request and "begin".
func (r *StartGenerateRequest) UnmarshalJSON(b []byte) error {
	if err := r.CompletionRequest.UnmarshalJSON(b); err != nil {
		return err
	}
	var f startGenerateFields
	err := takeFields(b, &f, r.Extra)
	r.Begin = f.Begin
	return err
}

type startGenerateFields struct {
	Begin int `json:"begin"`
}

// PathRelease is caddy-mlc's extension of the microserving API (MLC-LLM
// has no such call): the router frees a prep_recv reservation it gave up
// on (the client left, remote_send failed, or the next attempt went to
// another engine) at once, instead of leaving its KV pages held until the
// engine's prep_recv timeout. A release also stands for a prep_recv of the
// same user still on its way (the router gave up before the engine saw
// it): the engine refuses it when it comes. The user names one attempt, so
// no later prep_recv needs it. The built-in engine serves it; an engine
// that does not (MLC's own) answers 404, and the router then falls back to
// what MLC's API offers (see docs/operations.md, "Reservations").
const PathRelease = PathMicroserving + "release"

// ReleaseRequest is the body of POST /microserving/release.
type ReleaseRequest struct {
	// User is the user field of the prep_recv to undo: its reservation is
	// freed, or, when it still waits for pages, it is withdrawn.
	User string `json:"user"`
}

// ReleaseResponse is the answer of POST /microserving/release.
type ReleaseResponse struct {
	// Released reports that a reservation or a waiting prep_recv of the
	// user was found and dropped; false when there was none (already
	// used by start_generate, expired, or never made).
	Released bool `json:"released"`
}
