package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// scanIDs reads only what json.Unmarshal reads into []int, and the same.
func FuzzScanIDs(f *testing.F) {
	for _, s := range []string{`[]`, `[1,2,3]`, ` [ 0 , -7 ,128000 ] `, `[1.0]`, `[1e3]`, `[01]`, `[-0]`, `[99999999999999999999]`, `[1,]`, `[1]x`, `["1"]`, `[null]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, ok := scanIDs(b)
		if !ok {
			return
		}
		var want []int
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%q: scanned %v, json.Unmarshal refuses it: %v", b, ids, err)
		}
		if !reflect.DeepEqual(ids, want) {
			t.Fatalf("%q: scanned %#v, json.Unmarshal %#v", b, ids, want)
		}
	})
}

func TestModelOf(t *testing.T) {
	for _, c := range []struct {
		body  string
		model string
		ok    bool
	}{
		{`{"model":"tiny","prompt":"x"}`, "tiny", true},
		{`{"prompt":{"a":[1,2]}, "model" : "llama3"}`, "llama3", true},
		{`{"prompt":"x"}`, "", true},
		{`{"model":null}`, "", true},
		{`{"model":3}`, "", false},
		{`not json`, "", true},
	} {
		if m, ok := ModelOf([]byte(c.body)); m != c.model || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.body, m, ok, c.model, c.ok)
		}
	}
}
