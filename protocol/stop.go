package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Bounds of a request's stop strings. Every generated token is checked
// against each stop string, by the engine and again by the router (which
// sees the text across resumed attempts), so the count and length bound
// the work per token. OpenAI allows 4; MLC-LLM sets no bound; 16 strings
// of 256 bytes leave room for real templates and tools while keeping the
// per-token scan small. Empty strings are ignored and not counted.
const (
	MaxStopStrings = 16
	MaxStopBytes   = 256
)

// StopList is the "stop" field: a string or an array of strings.
type StopList []string

// UnmarshalJSON reads a JSON string, an array of strings, or null.
func (s *StopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = StopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &fieldError{param: "stop", msg: "stop must be a string or an array of strings"}
	}
	*s = many
	return nil
}

// Validate checks the bounds MaxStopStrings and MaxStopBytes.
func (s StopList) Validate() *Error {
	n := 0
	for i, st := range s {
		if st == "" {
			continue
		}
		if n++; n > MaxStopStrings {
			return InvalidRequest("stop", "stop takes at most %d strings (empty ones not counted)", MaxStopStrings).WithCode(CodeArrayTooLong)
		}
		if len(st) > MaxStopBytes {
			return InvalidRequest(fmt.Sprintf("stop[%d]", i), "stop[%d] is %d bytes long; a stop string is at most %d bytes", i, len(st), MaxStopBytes).WithCode(CodeStringTooLong)
		}
	}
	return nil
}
