package toolcall

import (
	"reflect"
	"strings"
	"testing"
)

// TestHeldBound checks that a call in progress past the bound is released
// as text, the same however the text arrives.
func TestHeldBound(t *testing.T) {
	const limit = 40
	long := strings.Repeat("y", 60)
	for _, c := range []struct{ format, in string }{
		{"hermes", `a<tool_call>{"name":"f","arguments":{"x":"` + long + `"}}</tool_call><tool_call>{"name":"g"}</tool_call>`},
		{"mistral", `a[TOOL_CALLS][{"name":"f","arguments":{"x":"` + long + `"}}]`},
		{"llama3_json", `{"name":"f","parameters":{"x":"` + long + `"}}`},
		{"pythonic", `[f(x="` + long + `")]`},
		{"mlc", `f(x="` + long + `")`},
	} {
		got := feed(t, c.format, limit, c.in)
		var text string
		for _, e := range got {
			if e.Call != nil && e.Call.Name == "f" {
				t.Errorf("%s: call past the bound returned: %s", c.format, show(got))
			}
			text += e.Text
		}
		if c.format != "hermes" && text != c.in {
			t.Errorf("%s: text %q, want the input", c.format, text)
		}
		checkSplits(t, c.format, limit, c.in)
	}
	// hermes resumes after the released text: the next short call is one.
	got := feed(t, "hermes", 40, `<tool_call>`+long+`</tool_call><tool_call>{"name":"g"}</tool_call>`)
	if want := []Event{txt(`<tool_call>` + long + `</tool_call>`), tc("g", "{}")}; !reflect.DeepEqual(got, want) {
		t.Errorf("hermes after release: %s", show(got))
	}
}

// TestHeldBoundMiB checks the real bound: a never-closed call is released
// before End, once it passes 1 MiB.
func TestHeldBoundMiB(t *testing.T) {
	p, _ := New("hermes")
	released := 0
	released += len(p.Push("<tool_call>"))
	chunk := strings.Repeat("z", 4096)
	for i := 0; i < 300; i++ {
		for _, e := range p.Push(chunk) {
			released += len(e.Text)
		}
	}
	if released < maxHeld {
		t.Fatalf("released %d bytes before End, want at least %d", released, maxHeld)
	}
}

// TestDeepNesting checks that deep literals end as text, not a stack overflow.
func TestDeepNesting(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// The list and the call's parentheses are two levels; 62 more reach 64.
	if got := feed(t, "pythonic", maxHeld, "[f(a="+nest(62)+")]"); len(got) != 1 || got[0].Call == nil {
		t.Errorf("depth 64: %s", show(got))
	}
	for _, in := range []string{"[f(a=" + nest(63) + ")]", "[f(a=" + nest(200000) + ")]", "[f(a=" + strings.Repeat("(", 200000)} {
		if got := feed(t, "pythonic", maxHeld, in); len(got) != 1 || got[0].Text != in {
			t.Errorf("depth past 64 not text: %.80s", show(got))
		}
	}
	deep := "f(a=" + strings.Repeat("{'k': ", 100000)
	if got := feed(t, "mlc", maxHeld, deep); len(got) != 1 || got[0].Text != deep {
		t.Errorf("mlc deep dict not text")
	}
}

// TestSmallPiecesLinear feeds a call of almost 1 MiB in token-sized pieces:
// each Push must cost its own length, or this takes minutes, not moments.
func TestSmallPiecesLinear(t *testing.T) {
	body := strings.Repeat("abcd", (maxHeld-100)/4)
	for format, in := range map[string]string{
		"hermes":      `<tool_call>{"name":"f","arguments":{"x":"` + body + `"}}</tool_call>`,
		"mistral":     `[TOOL_CALLS][{"name":"f","arguments":{"x":"` + body + `"}}]`,
		"llama3_json": `{"name":"f","parameters":{"x":"` + body + `"}}`,
		"pythonic":    `[f(x="` + body + `")]`,
		"mlc":         `f(x="` + body + `")`,
	} {
		p, _ := New(format)
		var evs []Event
		for i := 0; i < len(in); i += 4 {
			evs = append(evs, p.Push(in[i:min(i+4, len(in))])...)
		}
		evs = append(evs, p.End()...)
		if len(evs) != 1 || evs[0].Call == nil || len(evs[0].Call.Arguments) != len(body)+8 {
			t.Errorf("%s: want one call, got %d events", format, len(evs))
		}
	}
}
