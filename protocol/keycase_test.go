package protocol

import (
	"encoding/json"
	"testing"
)

// objectKeys finds the keys a decode into a map finds, in any object
// encoding/json accepts.
func FuzzObjectKeys(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, ` { "a" : [1, {"b": "}"}] , "c\"d": null, "e":{"f":[[]]} } `,
		`{"Content":"x","content":"y"}`, `{"\u0043ontent":true}`, `{"a":"\\"}`, `{"a":-1.5e3,"b":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil || m == nil {
			return
		}
		got := map[string]bool{}
		complete := objectKeys(b, func(k []byte) bool {
			key := string(k)
			if err := json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &key); err != nil {
				t.Fatalf("%q: key %q is not a JSON string's content", b, k)
			}
			got[key] = true
			return true
		})
		if !complete {
			t.Fatalf("%q: an object encoding/json reads whole not read to its end", b)
		}
		if len(got) != len(m) {
			t.Fatalf("%q: keys %v, encoding/json found %d", b, got, len(m))
		}
		for k := range m {
			if !got[k] {
				t.Fatalf("%q: key %q not found (found %v)", b, k, got)
			}
		}
	})
}
