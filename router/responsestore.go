package router

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// ResponseStore keeps the Responses API's stored responses (store: true,
// the API's default), each visible to the tenant that created it only
// (Facts.Tenant): another tenant's id is not found, as an unknown id is.
// Records are opaque to the store; it may forget them after a retention
// time of its own.
type ResponseStore interface {
	// Put keeps record as the response id of tenant, replacing any.
	Put(ctx context.Context, tenant, id string, record []byte) error
	// Get returns the record of the response id of tenant; found is
	// false when there is none.
	Get(ctx context.Context, tenant, id string) (record []byte, found bool, err error)
	// Delete forgets the response id of tenant; deleted is false when
	// there was none.
	Delete(ctx context.Context, tenant, id string) (deleted bool, err error)
}

// ErrStoreUnavailable is what a ResponseStore's error wraps when the
// store is out of reach (a shared store's server down or not answering
// in time): a read or a delete is then a 503, which a client may retry,
// rather than a 404 that would say the response is gone. A write that
// fails is a 500 (or a stream's response.failed) whatever the cause.
var ErrStoreUnavailable = errors.New("the response store is out of reach")

// storeUnavailableRetry is the Retry-After of a 503 of an unreachable
// store: a shared store's replica looks for its server again within
// seconds.
const storeUnavailableRetry = 2 * time.Second

// storeError is the answer to a failed read or delete of the stored
// response id.
func storeError(what, id string, err error) *protocol.Error {
	if errors.Is(err, ErrStoreUnavailable) {
		e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
			"%s the stored response %s: the response store is out of reach; retry shortly (%v)", what, id, err)
		e.RetryAfter = storeUnavailableRetry
		return e
	}
	return protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "%s the stored response %s: %v", what, id, err)
}

// DefaultResponsesMaxBytes bounds a stored response's record (the
// response, its input and the conversation before it): a long
// conversation of long turns fits, a store that grows without bound per
// response does not.
const DefaultResponsesMaxBytes = 16 << 20

// storeTimeout bounds one call to the response store.
const storeTimeout = 10 * time.Second

// StoreResponses makes the Responses API keep responses in s, each record
// at most maxBytes (0: DefaultResponsesMaxBytes); without a store (nil,
// the default) responses are answered with store false, and
// previous_response_id and /v1/responses/{id} are refused.
func (m *Models) StoreResponses(s ResponseStore, maxBytes int) {
	if maxBytes <= 0 {
		maxBytes = DefaultResponsesMaxBytes
	}
	m.responses, m.responsesMax = s, maxBytes
}

// storedResponse is the record of a stored response: the response, this
// request's input items, and the conversation before them (the previous
// response's history, input and output), so that continuing it reads
// one record.
type storedResponse struct {
	Response protocol.Response          `json:"response"`
	Input    []protocol.ResponseMessage `json:"input"`
	History  []protocol.ResponseMessage `json:"history,omitempty"`
}

// conversation is the conversation a response continuing this one
// continues: its history, its input, its output.
func (s *storedResponse) conversation() []protocol.ResponseMessage {
	out := append(append([]protocol.ResponseMessage(nil), s.History...), s.Input...)
	return append(out, s.Response.Output...)
}

// loadResponse reads the response id of tenant from s; nil, nil when it
// is not there.
func loadResponse(ctx context.Context, s ResponseStore, tenant, id string) (*storedResponse, *protocol.Error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	b, found, err := s.Get(ctx, tenant, id)
	if err != nil {
		return nil, storeError("reading", id, err)
	}
	if !found {
		return nil, nil
	}
	var rec storedResponse
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "the stored response %s is unreadable: %v", id, err)
	}
	return &rec, nil
}

// saveResponse keeps rec for tenant in s, unless its record is over
// maxBytes.
func saveResponse(ctx context.Context, s ResponseStore, tenant string, maxBytes int, rec *storedResponse) *protocol.Error {
	b, err := json.Marshal(rec)
	if err != nil {
		return protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "encoding the response to store: %v", err)
	}
	if len(b) > maxBytes {
		return tooLargeToStore(len(b), maxBytes)
	}
	// Stored even when the client left after the last text: it may
	// fetch the response later.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := s.Put(ctx, tenant, rec.Response.ID, b); err != nil {
		return protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "storing the response: %v", err)
	}
	return nil
}

// tooLargeToStore refuses a conversation whose record would be over the
// store's bound.
func tooLargeToStore(n, maxBytes int) *protocol.Error {
	return protocol.InvalidRequest("store", "the conversation is too long to store (%d bytes, over this server's %d): start a new conversation, or send store: false with the whole conversation as input",
		n, maxBytes).WithCode(protocol.CodeStringTooLong)
}

// responseNotFound is the answer to an id that is not stored for the
// tenant: unknown, expired, deleted or another tenant's alike.
func responseNotFound(id, param string) *protocol.Error {
	e := protocol.Errorf(http.StatusNotFound, protocol.ErrTypeInvalidRequest, "Response with id %q not found.", id).WithCode("response_not_found")
	if param != "" {
		e = protocol.Errorf(http.StatusNotFound, protocol.ErrTypeInvalidRequest, "Previous response with id %q not found.", id).WithCode("previous_response_not_found")
		e.Param = &param
	}
	return e
}

// noStore refuses what needs stored responses on a server without a
// store.
func noStore(param string) *protocol.Error {
	return protocol.InvalidRequest(param, "this server keeps no responses: send the whole conversation as input").WithCode(protocol.CodeUnsupportedValue)
}

// sizeOf is the size of v's JSON, to bound a record before the answer is
// generated.
func sizeOf(v any) int {
	b, _ := json.Marshal(v) // messages of text always encode
	return len(b)
}
