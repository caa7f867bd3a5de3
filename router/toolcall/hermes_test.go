package toolcall

import (
	"reflect"
	"testing"
)

func TestHermes(t *testing.T) {
	call := `<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>`
	runCases(t, "hermes", []parseCase{
		{"text", "hello <tool world", []Event{txt("hello <tool world")}},
		{"call between text", "a" + call + "b", []Event{txt("a"), tc("f", `{"x":1}`), txt("b")}},
		{"two calls", call + "\n" + call, []Event{tc("f", `{"x":1}`), txt("\n"), tc("f", `{"x":1}`)}},
		{"qwen newlines", "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			[]Event{tc("get", `{"city":"Paris"}`)}},
		{"parameters", `<tool_call>{"name":"f","parameters":{"a":[1, 2]}}</tool_call>`, []Event{tc("f", `{"a":[1,2]}`)}},
		{"arguments as string", `<tool_call>{"name":"f","arguments":"{\"a\": 1}"}</tool_call>`, []Event{tc("f", `{"a":1}`)}},
		{"no arguments", `<tool_call>{"name":"f"}</tool_call>`, []Event{tc("f", `{}`)}},
		{"html kept", `<tool_call>{"name":"f","arguments":{"h":"<b>&"}}</tool_call>`, []Event{tc("f", `{"h":"<b>&"}`)}},
		{"invalid json", `a<tool_call>{"name": "f",}</tool_call>b`, []Event{txt(`a<tool_call>{"name": "f",}</tool_call>b`)}},
		{"arguments array", `<tool_call>{"name":"f","arguments":[1]}</tool_call>`, []Event{txt(`<tool_call>{"name":"f","arguments":[1]}</tool_call>`)}},
		{"no name", `<tool_call>{"arguments":{}}</tool_call>`, []Event{txt(`<tool_call>{"arguments":{}}</tool_call>`)}},
		{"unclosed valid", `a<tool_call>{"name":"f","arguments":{}}`, []Event{txt("a"), tc("f", `{}`)}},
		{"unclosed invalid", `a<tool_call>{"name":"f"`, []Event{txt(`a<tool_call>{"name":"f"`)}},
		{"partial tag at end", "a<tool_ca", []Event{txt("a<tool_ca")}},
	})
}

// TestHermesHoldsMinimum checks that text is released as soon as it cannot
// be the start of <tool_call>.
func TestHermesHoldsMinimum(t *testing.T) {
	p, _ := New("hermes")
	steps := []struct {
		in   string
		want []Event
	}{
		{"hi <", []Event{txt("hi ")}},
		{"tool", nil},
		{"s", []Event{txt("<tools")}},
		{"<tool_call>{", nil},
		{`"name":"f"}</tool_call>x<`, []Event{tc("f", "{}"), txt("x")}},
	}
	for _, s := range steps {
		if got := p.Push(s.in); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("Push(%q) = %s, want %s", s.in, show(got), show(s.want))
		}
	}
	if got := p.End(); !reflect.DeepEqual(got, []Event{txt("<")}) {
		t.Fatalf("End = %s", show(got))
	}
}
