package protocol

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// encoding/json matches an object's keys to struct fields ignoring case,
// where MLC-LLM's server (pydantic) and OpenAI's match them exactly: to
// them "Content" is not "content" but an unknown field, and a message
// without its content. A request this package accepts must mean the same
// to an engine, so a key that names a field in another case is refused.
// (encoding/json/v2 matches case-sensitively; until it leaves
// GOEXPERIMENT, this check does that part of its work.)

// checkKeyCase returns an error naming the first key of the JSON object b
// that differs only in case from a field of the struct type t. b that is
// not an object is left to the decoder to refuse.
func checkKeyCase(b []byte, t reflect.Type) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return nil
	}
	keys := jsonKeys(t)
	for k := range obj {
		if keys[k] {
			continue
		}
		for name := range keys {
			if strings.EqualFold(k, name) {
				return &fieldError{param: k, msg: fmt.Sprintf("unknown field %q: field names are case-sensitive (did you mean %q?)", k, name)}
			}
		}
	}
	return nil
}

// unmarshalExact is json.Unmarshal into *v, a struct, with its keys
// matched exactly (see checkKeyCase).
func unmarshalExact[T any](b []byte, v *T) error {
	if err := checkKeyCase(b, reflect.TypeFor[T]()); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
