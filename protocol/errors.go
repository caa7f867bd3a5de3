package protocol

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error types of the OpenAI error body.
const (
	ErrTypeInvalidRequest = "invalid_request_error"
	ErrTypeServer         = "server_error"
	ErrTypeUnavailable    = "service_unavailable"
	ErrTypeNotFound       = "not_found_error"
)

// Codes of request errors, as OpenAI names them: a client that branches on
// OpenAI's codes branches the same way here.
const (
	CodeMissingParameter = "missing_required_parameter"
	CodeInvalidType      = "invalid_type"
	CodeInvalidValue     = "invalid_value"
	CodeUnsupportedValue = "unsupported_value"
	CodeEmptyArray       = "empty_array"
	CodeArrayTooLong     = "array_above_max_length"
	CodeStringTooLong    = "string_above_max_length"
	CodeIntegerAboveMax  = "integer_above_max_value"
	CodeIntegerBelowMin  = "integer_below_min_value"
	CodeDecimalAboveMax  = "decimal_above_max_value"
	CodeDecimalBelowMin  = "decimal_below_min_value"
	// CodeRequestTooLarge is the code of a body over the size limit (413).
	CodeRequestTooLarge = "request_too_large"
	// CodeRequestTimeout is the code of a request whose body did not
	// arrive in time (408).
	CodeRequestTimeout = "request_timeout"
	// CodeModelNotFound is the code of a request for a model that is not
	// served (404).
	CodeModelNotFound = "model_not_found"
	// CodeUnknownURL is the code of a request for a path of the API that
	// does not exist (404).
	CodeUnknownURL = "unknown_url"
	// CodeContextLengthExceeded is the code of a request whose prompt and
	// max_tokens do not fit the model's context (400).
	CodeContextLengthExceeded = "context_length_exceeded"
)

// StatusClientClosedRequest is the status of a request whose client went
// away before its answer (nginx's 499). No client reads it: it names the
// outcome in logs, metrics and between a router and its engines.
const StatusClientClosedRequest = 499

// Error is an OpenAI-style API error. It is both a Go error and the
// "error" object of the body {"error": {...}}.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// Status is the HTTP status the error is answered with.
	Status int `json:"-"`
	// RetryAfter, when positive, is sent as the Retry-After header (whole
	// seconds, rounded up): when a client may try again.
	RetryAfter time.Duration `json:"-"`
}

// ErrorBody is the JSON body of an error answer.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Errorf returns an error with the given status, type and message.
func Errorf(status int, typ, format string, args ...any) *Error {
	return &Error{Message: fmt.Sprintf(format, args...), Type: typ, Status: status}
}

// InvalidRequest returns a 400 invalid_request_error about param.
func InvalidRequest(param, format string, args ...any) *Error {
	e := Errorf(http.StatusBadRequest, ErrTypeInvalidRequest, format, args...)
	if param != "" {
		e.Param = &param
	}
	return e
}

// WithCode sets the error's code.
func (e *Error) WithCode(code string) *Error {
	e.Code = &code
	return e
}

// Body returns the JSON body {"error": {...}}.
func (e *Error) Body() []byte {
	b, _ := json.Marshal(ErrorBody{Error: e})
	return b
}

// Write answers the error on w with its status.
func (e *Error) Write(w http.ResponseWriter) { e.WriteBody(w, e.Body()) }

// WriteBody answers the error on w with its status and headers, and body:
// the error in the shape of another API (Anthropic's).
func (e *Error) WriteBody(w http.ResponseWriter, body []byte) {
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// ParseError reads an error body; it returns nil when b is not one. It
// reads OpenAI's {"error": {...}}, which the built-in engine and the router
// answer, and MLC-LLM's ErrorResponse, {"object": "error", "message": ...,
// "code": <status>}, which mlc_llm serve answers JSON-encoded once more,
// as a JSON string; a 4xx of MLC's is the client's invalid request.
func ParseError(status int, b []byte) *Error {
	var body ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error != nil {
		body.Error.Status = status
		return body.Error
	}
	var inner string
	if json.Unmarshal(b, &inner) == nil {
		b = []byte(inner)
	}
	var mlc struct {
		Object  string  `json:"object"`
		Message *string `json:"message"`
	}
	if json.Unmarshal(b, &mlc) != nil || mlc.Object != "error" || mlc.Message == nil {
		return nil
	}
	typ := ErrTypeServer
	if status >= 400 && status < 500 {
		typ = ErrTypeInvalidRequest
	}
	return &Error{Message: *mlc.Message, Type: typ, Status: status}
}
