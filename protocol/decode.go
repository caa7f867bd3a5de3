package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
)

// DefaultMaxBodyBytes bounds a request body when no other limit is set.
const DefaultMaxBodyBytes = 4 << 20

// ReadBody reads at most limit bytes of r. A longer body is a 413 (code
// "request_too_large"): the request may be fine, only too large for this
// server, and a client that tells the two apart (the OpenAI SDKs map the
// status to an error class) should not be told its JSON is wrong. A body
// cut short by an http.MaxBytesReader (Caddy's request_body limit) is the
// same 413. An empty body is a 400.
func ReadBody(r io.Reader, limit int64) ([]byte, *Error) {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, bodyTooLarge(tooLarge.Limit)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, Errorf(http.StatusRequestTimeout, ErrTypeInvalidRequest, "the request body did not arrive in time").WithCode(CodeRequestTimeout)
	}
	if err != nil {
		return nil, InvalidRequest("", "reading the request body: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, bodyTooLarge(limit)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, InvalidRequest("", "request body is empty; expected a JSON object")
	}
	return b, nil
}

func bodyTooLarge(limit int64) *Error {
	return Errorf(http.StatusRequestEntityTooLarge, ErrTypeInvalidRequest, "request body is larger than %d bytes", limit).WithCode(CodeRequestTooLarge)
}

// DecodeJSON decodes one JSON object from b into v, turning JSON errors into
// 400 errors whose message names the field and the expected type.
func DecodeJSON(b []byte, v any) *Error {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return InvalidRequest("", "request body must be a JSON object")
	}
	// json.Unmarshal, not a Decoder: it reads b in place where a Decoder
	// copies it into a buffer of its own, and it refuses what follows the
	// object, which its syntax check finds before any field is decoded.
	if err := json.Unmarshal(trimmed, v); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) && strings.HasSuffix(syntax.Error(), "after top-level value") {
			return InvalidRequest("", "invalid JSON: data after the top-level object")
		}
		return jsonError(err)
	}
	return nil
}

// fieldError is the error of a field's own UnmarshalJSON, which
// encoding/json returns as is: it names the field so that the 400 does.
type fieldError struct{ param, msg string }

func (e *fieldError) Error() string { return e.msg }

func jsonError(err error) *Error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var field *fieldError
	switch {
	case errors.As(err, &field):
		return InvalidRequest(field.param, "%s", field.msg).WithCode(CodeInvalidType)
	case errors.As(err, &syntax):
		return InvalidRequest("", "invalid JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return InvalidRequest("", "invalid JSON: expected %s, got %s", typeName(typ.Type), typ.Value).WithCode(CodeInvalidType)
		}
		return InvalidRequest(typ.Field, "%s: expected %s, got %s", typ.Field, typeName(typ.Type), typ.Value).WithCode(CodeInvalidType)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return InvalidRequest("", "invalid JSON: unexpected end of input")
	}
	return InvalidRequest("", "invalid request: %v", err)
}

// typeName names a Go type the way a JSON user thinks of it.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return fmt.Sprintf("a value of type %s", t)
}

// DecodeEngineRequest reads, decodes and validates the completion request
// body (of at most limit bytes) that an engine serves, checked by
// ValidateForEngine.
func DecodeEngineRequest(r io.Reader, limit int64) (*CompletionRequest, *Error) {
	return decodeCompletionRequest(r, limit, (*CompletionRequest).ValidateForEngine)
}

func decodeCompletionRequest(r io.Reader, limit int64, validate func(*CompletionRequest) *Error) (*CompletionRequest, *Error) {
	b, e := ReadBody(r, limit)
	if e != nil {
		return nil, e
	}
	var req CompletionRequest
	if e := DecodeJSON(b, &req); e != nil {
		return nil, e
	}
	if e := validate(&req); e != nil {
		return nil, e
	}
	return &req, nil
}
