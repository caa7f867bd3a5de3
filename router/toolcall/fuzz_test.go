package toolcall

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParsers checks, for every format, that no input panics, that a split
// changes nothing, and that events reconstruct the input sensibly: text
// events are pieces of the input in order, all of it when no call was
// found, and never all of it when one was (a call's markup is not also
// returned as text); calls have a name and a JSON object for arguments.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		`a<tool_call>{"name":"f","arguments":{"x":1}}</tool_call>b<tool_ca`,
		`<|python_tag|>{"name":"f","parameters":{}}; {"name":"g"}`,
		`x[TOOL_CALLS][{"name":"f","arguments":{}}]`, `[TOOL_CALLS]f[ARGS]{"a":1}`,
		`[f(a=1, b='x\n', c=(1,), d={"k": None}), g()]`, `["f(a=1)", "g(b=2.5e-7)"]`, `f(1, a=0x_1f)`,
	} {
		f.Add(s, uint(7))
	}
	f.Fuzz(func(t *testing.T, in string, split uint) {
		for _, format := range append(Formats(), JSON) {
			whole := feed(t, format, maxHeld, in)
			i := int(split % uint(len(in)+1))
			if got := feed(t, format, maxHeld, in[:i], in[i:]); !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s split at %d: %s, whole %s", format, i, show(got), show(whole))
			}
			checkEvents(t, format, in, whole)
		}
	})
}

func checkEvents(t *testing.T, format, in string, evs []Event) {
	var text string
	calls, at := 0, 0
	for _, e := range evs {
		if e.Call == nil {
			j := strings.Index(in[at:], e.Text)
			if e.Text == "" || j < 0 {
				t.Fatalf("%s: text %q is not the next piece of the input", format, e.Text)
			}
			at += j + len(e.Text)
			text += e.Text
			continue
		}
		calls++
		if e.Call.Name == "" || !json.Valid([]byte(e.Call.Arguments)) || e.Call.Arguments[0] != '{' {
			t.Fatalf("%s: bad call %+v", format, *e.Call)
		}
	}
	if calls == 0 && text != in {
		t.Fatalf("%s: no calls, text %q != input", format, text)
	}
	if calls > 0 && len(text) >= len(in) {
		t.Fatalf("%s: calls found but all input returned as text", format)
	}
}
