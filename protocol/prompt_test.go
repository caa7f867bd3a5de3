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
