package protocol

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// WriteJSON answers v as JSON with status. The router and the built-in
// engine both answer this way, so that their bodies end alike (with a
// newline) and a value that cannot be encoded is a 500 error body rather
// than half an answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := AppendJSON(nil, v)
	if err != nil {
		Errorf(http.StatusInternalServerError, ErrTypeServer, "encoding the answer: %v", err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// AppendJSON appends v's JSON encoding to dst: json.Marshal's, written
// by hand for the types the router and the built-in engine encode most
// (their AppendJSON methods). The types are matched exactly, not by a
// method set: a struct that embeds one of them (the microserving
// requests embed CompletionRequest) has JSON of its own.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case CompletionResponse:
		return v.AppendJSON(dst)
	case *CompletionResponse:
		if v != nil {
			return v.AppendJSON(dst)
		}
	case CompletionRequest:
		return v.AppendJSON(dst)
	case *CompletionRequest:
		if v != nil {
			return v.AppendJSON(dst)
		}
	case PrepRecvRequest:
		return v.AppendJSON(dst)
	case RemoteSendRequest:
		return v.AppendJSON(dst)
	case StartGenerateRequest:
		return v.AppendJSON(dst)
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

// NewID returns an id for a request or an answer: prefix ("cmpl-",
// "chatcmpl-" or none) and 24 random hex digits, which no two requests of
// a fleet share in practice.
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
