package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
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
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
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

// splitExtra decodes b into known (a pointer to a struct without custom
// JSON methods) and returns the fields known does not model.
func splitExtra(b []byte, known any) (Extra, error) {
	if err := json.Unmarshal(b, known); err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	keys := jsonKeys(reflect.TypeOf(known).Elem())
	var extra Extra
	for k, v := range all {
		if keys[k] {
			continue
		}
		if extra == nil {
			extra = Extra{}
		}
		extra[k] = v
	}
	return extra, nil
}

// joinExtra encodes known (a struct without custom JSON methods) and adds
// the fields of each extra map that known does not already write, in a
// stable order. Later maps do not override earlier ones.
func joinExtra(known any, extras ...Extra) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil {
		return nil, err
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(b, &present); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1]) // drop the closing brace
	first := len(present) == 0
	for _, extra := range extras {
		names := make([]string, 0, len(extra))
		for k := range extra {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if _, dup := present[k]; dup {
				continue
			}
			present[k] = extra[k]
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

// take removes field name from e and decodes it into v. It reports whether
// the field was present.
func (e Extra) take(name string, v any) (bool, error) {
	raw, ok := e[name]
	if !ok {
		return false, nil
	}
	delete(e, name)
	return true, json.Unmarshal(raw, v)
}

// Clone returns a copy of e (the raw values are shared; they are never
// modified in place).
func (e Extra) Clone() Extra {
	if e == nil {
		return nil
	}
	c := make(Extra, len(e))
	for k, v := range e {
		c[k] = v
	}
	return c
}
