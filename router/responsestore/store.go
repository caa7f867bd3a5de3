// Package responsestore is the Responses API's stored responses as the
// router reads and writes them: the Store its backends implement (the
// adapter's SQLite and Redis stores, caddymlc/internal/respstore), the
// Record of a stored response, and its reads and writes, bounded in time
// and size, with the API's errors for each way they fail.
package responsestore

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Store keeps the Responses API's stored responses (store: true,
// the API's default), each visible to the tenant that created it only
// (Facts.Tenant): another tenant's id is not found, as an unknown id is.
// Records are opaque to the store; it may forget them after a retention
// time of its own.
type Store interface {
	// Put keeps record as the response id of tenant, replacing any.
	Put(ctx context.Context, tenant, id string, record []byte) error
	// Get returns the record of the response id of tenant; found is
	// false when there is none.
	Get(ctx context.Context, tenant, id string) (record []byte, found bool, err error)
	// Delete forgets the response id of tenant; deleted is false when
	// there was none.
	Delete(ctx context.Context, tenant, id string) (deleted bool, err error)
}

// ErrUnavailable is what a Store's error wraps when the
// store is out of reach (a shared store's server down or not answering
// in time): a read or a delete is then a 503, which a client may retry,
// rather than a 404 that would say the response is gone. A write that
// fails is a 500 (or a stream's response.failed) whatever the cause.
var ErrUnavailable = errors.New("the response store is out of reach")

// storeUnavailableRetry is the Retry-After of a 503 of an unreachable
// store: a shared store's replica looks for its server again within
// seconds.
const storeUnavailableRetry = 2 * time.Second

// Error is the answer to a failed read or delete (what) of the stored
// response id.
func Error(what, id string, err error) *protocol.Error {
	if errors.Is(err, ErrUnavailable) {
		e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
			"%s the stored response %s: the response store is out of reach; retry shortly (%v)", what, id, err)
		e.RetryAfter = storeUnavailableRetry
		return e
	}
	return protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "%s the stored response %s: %v", what, id, err)
}

// DefaultMaxBytes bounds a stored response's record (the
// response, its input and the conversation before it): a long
// conversation of long turns fits, a store that grows without bound per
// response does not.
const DefaultMaxBytes = 16 << 20

// Timeout bounds one call to the response store.
const Timeout = 10 * time.Second

// Record is the record of a stored response: the response, its
// request's input items, and the conversation before them (the previous
// response's history, input and output), so that continuing it reads
// one record.
type Record struct {
	Response protocol.Response          `json:"response"`
	Input    []protocol.ResponseMessage `json:"input"`
	History  []protocol.ResponseMessage `json:"history,omitempty"`
}

// Conversation is the conversation a response continuing this one
// continues: its history, its input, its output.
func (s *Record) Conversation() []protocol.ResponseMessage {
	out := append(append([]protocol.ResponseMessage(nil), s.History...), s.Input...)
	return append(out, s.Response.Output...)
}

// Load reads the response id of tenant from s; nil, nil when it is not
// there.
func Load(ctx context.Context, s Store, tenant, id string) (*Record, *protocol.Error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	b, found, err := s.Get(ctx, tenant, id)
	if err != nil {
		return nil, Error("reading", id, err)
	}
	if !found {
		return nil, nil
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "the stored response %s is unreadable: %v", id, err)
	}
	return &rec, nil
}

// Save keeps rec for tenant in s, unless its record is over maxBytes.
func Save(ctx context.Context, s Store, tenant string, maxBytes int, rec *Record) *protocol.Error {
	b, err := json.Marshal(rec)
	if err != nil {
		return protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "encoding the response to store: %v", err)
	}
	if len(b) > maxBytes {
		return TooLarge(len(b), maxBytes)
	}
	// Stored even when the client left after the last text: it may
	// fetch the response later.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
	defer cancel()
	if err := s.Put(ctx, tenant, rec.Response.ID, b); err != nil {
		return protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "storing the response: %v", err)
	}
	return nil
}

// TooLarge refuses a conversation whose record would be over the
// store's bound.
func TooLarge(n, maxBytes int) *protocol.Error {
	return protocol.InvalidRequest("store", "the conversation is too long to store (%d bytes, over this server's %d): start a new conversation, or send store: false with the whole conversation as input",
		n, maxBytes).WithCode(protocol.CodeStringTooLong)
}

// NotFound is the answer to an id that is not stored for the tenant:
// unknown, expired, deleted or another tenant's alike; param is the
// request's field that named it, "" for a path.
func NotFound(id, param string) *protocol.Error {
	e := protocol.Errorf(http.StatusNotFound, protocol.ErrTypeInvalidRequest, "Response with id %q not found.", id).WithCode("response_not_found")
	if param != "" {
		e = protocol.Errorf(http.StatusNotFound, protocol.ErrTypeInvalidRequest, "Previous response with id %q not found.", id).WithCode("previous_response_not_found")
		e.Param = &param
	}
	return e
}

// None refuses what needs stored responses on a server without a store.
func None(param string) *protocol.Error {
	return protocol.InvalidRequest(param, "this server keeps no responses: send the whole conversation as input").WithCode(protocol.CodeUnsupportedValue)
}

// SizeOf is the size of v's JSON, to bound a record before the answer is
// generated.
func SizeOf(v any) int {
	b, _ := json.Marshal(v) // messages of text always encode
	return len(b)
}
