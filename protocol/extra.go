package protocol

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Extra holds the JSON fields of an object that its Go type does not model,
// keyed by name, so that they survive a decode/encode round trip.
type Extra map[string]json.RawMessage

// knownKeys caches, per struct type, the JSON names of its fields
// (embedded structs included).
var knownKeys sync.Map // reflect.Type -> map[string]bool

func jsonKeys(t reflect.Type) map[string]bool {
	if v, ok := knownKeys.Load(t); ok {
		return v.(map[string]bool)
	}
	keys := map[string]bool{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k := range jsonKeys(f.Type) {
				keys[k] = true
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[name] = true
	}
	knownKeys.Store(t, keys)
	return keys
}

// decodeExtra decodes b into *dst and returns the fields of b that F does
// not model. F is a struct type without JSON methods: a type with Extra
// declares a method-less twin (type fooFields Foo) and decodes through it,
// so that its own UnmarshalJSON is one line:
//
//	func (r *Foo) UnmarshalJSON(b []byte) error {
//		return decodeExtra(b, (*fooFields)(r), &r.Extra)
//	}
//
// Fields absent from b are reset, as for a fresh value.
func decodeExtra[F any](b []byte, dst *F, extra *Extra) error {
	known, err := checkKeys(b, reflect.TypeFor[F]())
	if err != nil {
		return err
	}
	// Most requests have no field F does not model (the key scan found
	// none): one decode reads them; the others take the long way.
	var fresh F
	if err := json.Unmarshal(b, &fresh); err != nil {
		return err
	}
	if known {
		*dst, *extra = fresh, nil
		return nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	keys := jsonKeys(reflect.TypeFor[F]())
	var unknown Extra
	for k, v := range all {
		if keys[k] {
			continue
		}
		if unknown == nil {
			unknown = Extra{}
		}
		unknown[k] = v
	}
	*dst = fresh
	*extra = unknown
	return nil
}

// takeFields decodes the fields of F (a struct without JSON methods) from
// b into *dst and removes them from extra: a type that extends another
// with a few fields (the microserving requests extend CompletionRequest)
// reads them this way after decoding the base, whose Extra caught them.
func takeFields[F any](b []byte, dst *F, extra Extra) error {
	if err := json.Unmarshal(b, dst); err != nil {
		return err
	}
	for k := range jsonKeys(reflect.TypeFor[F]()) {
		delete(extra, k)
	}
	return nil
}

// joinExtra encodes known (a struct without custom JSON methods) and adds
// the fields of each extra map that known does not already write, in a
// stable order. Later maps do not override earlier ones.
func joinExtra(known any, extras ...Extra) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil || !slices.ContainsFunc(extras, func(e Extra) bool { return len(e) > 0 }) {
		return b, err
	}
	// A key known's type has is known's, written or omitted; an extra key
	// is written once, the first map's.
	keys := jsonKeys(reflect.TypeOf(known))
	written := map[string]bool{}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1]) // drop the closing brace
	first := len(b) == 2    // "{}"
	for _, extra := range extras {
		for _, k := range slices.Sorted(maps.Keys(extra)) {
			if keys[k] || written[k] {
				continue
			}
			written[k] = true
			if !first {
				buf.WriteByte(',')
			}
			first = false
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			buf.Write(extra[k])
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Clone returns a copy of e (the raw values are shared; they are never
// modified in place).
func (e Extra) Clone() Extra {
	if e == nil {
		return nil
	}
	return maps.Clone(e)
}
