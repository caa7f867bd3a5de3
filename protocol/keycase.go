package protocol

import (
	"bytes"
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
	_, err := checkKeys(b, t)
	return err
}

// checkKeys is checkKeyCase that also reports whether every key of b
// names a field of t exactly: b then decodes into t with nothing left
// over. known is false for b that is not a well-formed object.
func checkKeys(b []byte, t reflect.Type) (known bool, err error) {
	keys := jsonKeys(t)
	known = true
	complete := objectKeys(b, func(k []byte) bool {
		if keys[string(k)] {
			return true
		}
		key := string(k)
		if bytes.IndexByte(k, '\\') >= 0 {
			if json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &key) != nil {
				known = false
				return true
			}
			if keys[key] {
				return true
			}
		}
		known = false
		for name := range keys {
			if strings.EqualFold(key, name) {
				err = &fieldError{param: key, msg: fmt.Sprintf("unknown field %q: field names are case-sensitive (did you mean %q?)", key, name)}
				return false
			}
		}
		return true
	})
	return known && complete && err == nil, err
}

// objectKeys calls yield with each key of the JSON object b, as it is
// written between its quotes (escapes not undone), until yield returns
// false. It reads no value, only skips it, and stops at anything that is
// not well-formed: the decoder refuses that. complete reports that it read
// the object to its end and b has nothing after it. (It is what a decode
// into a map[string]json.RawMessage found, at a tenth of the cost: every
// request goes through it.)
func objectKeys(b []byte, yield func(key []byte) bool) (complete bool) {
	s := jsonScanner{b: b}
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return s.end()
	}
	for {
		key, ok := s.rawString()
		if !ok || !s.byte(':') || !s.skipValue() || !yield(key) {
			return false
		}
		if !s.byte(',') {
			return s.byte('}') && s.end()
		}
	}
}

// unmarshalExact is json.Unmarshal into *v, a struct, with its keys
// matched exactly (see checkKeyCase).
func unmarshalExact[T any](b []byte, v *T) error {
	if err := checkKeyCase(b, reflect.TypeFor[T]()); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
