package toolcall

import (
	"reflect"
	"testing"
)

// tc and txt build expected events.
func tc(name, args string) Event { return Event{Call: &Call{Name: name, Arguments: args}} }
func txt(s string) Event         { return Event{Text: s} }

// merge joins adjacent text events, since how text is cut into events
// depends on how it arrived.
func merge(evs []Event) []Event {
	var out []Event
	for _, e := range evs {
		if e.Call == nil && len(out) > 0 && out[len(out)-1].Call == nil {
			out[len(out)-1].Text += e.Text
			continue
		}
		out = append(out, e)
	}
	return out
}

// feed runs a fresh parser over the pieces and returns its merged events.
func feed(t testing.TB, format string, limit int, pieces ...string) []Event {
	t.Helper()
	p, err := newParser(format, limit)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for _, s := range pieces {
		evs = append(evs, p.Push(s)...)
	}
	return merge(append(evs, p.End()...))
}

// checkSplits checks that the text split at every byte offset, and pushed
// byte by byte, gives what it gives whole.
func checkSplits(t *testing.T, format string, limit int, in string) {
	t.Helper()
	want := feed(t, format, limit, in)
	for i := 0; i <= len(in); i++ {
		if got := feed(t, format, limit, in[:i], in[i:]); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s split at %d of %q:\n got %s\nwant %s", format, i, in, show(got), show(want))
		}
	}
	bytes := make([]string, len(in))
	for i := range in {
		bytes[i] = in[i : i+1]
	}
	if got := feed(t, format, limit, bytes...); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s byte by byte %q:\n got %s\nwant %s", format, in, show(got), show(want))
	}
}

func show(evs []Event) string {
	s := "["
	for _, e := range evs {
		if e.Call != nil {
			s += " call(" + e.Call.Name + ", " + e.Call.Arguments + ")"
		} else {
			s += " text(" + e.Text + ")"
		}
	}
	return s + " ]"
}

type parseCase struct {
	name string
	in   string
	want []Event
}

// runCases checks each case whole, then split at every offset.
func runCases(t *testing.T, format string, cases []parseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := feed(t, format, maxHeld, c.in); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%q:\n got %s\nwant %s", c.in, show(got), show(c.want))
			}
			checkSplits(t, format, maxHeld, c.in)
		})
	}
}
