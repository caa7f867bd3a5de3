package toolcall

import (
	"reflect"
	"testing"
)

func TestLlama3JSON(t *testing.T) {
	f := `{"name": "f", "parameters": {"a": 1}}`
	runCases(t, "llama3_json", []parseCase{
		{"one", f, []Event{tc("f", `{"a":1}`)}},
		{"python tag", " <|python_tag|>" + f, []Event{tc("f", `{"a":1}`)}},
		{"arguments key", `{"name":"g","arguments":{"b":"x"}}`, []Event{tc("g", `{"b":"x"}`)}},
		{"two", f + "; " + `{"name":"g","parameters":{}}`, []Event{tc("f", `{"a":1}`), tc("g", `{}`)}},
		{"all or nothing", f + "; {\"name\": 1}", []Event{txt(f + "; {\"name\": 1}")}},
		{"no separator", f + f, []Event{txt(f + f)}},
		{"text", "Hello {x}", []Event{txt("Hello {x}")}},
		{"code", "<|python_tag|>print(1)", []Event{txt("<|python_tag|>print(1)")}},
		{"spaces only", "  \n", []Event{txt("  \n")}},
	})
}

func TestMistral(t *testing.T) {
	runCases(t, "mistral", []parseCase{
		{"array", `Sure. [TOOL_CALLS][{"name":"f","arguments":{"a":1}}, {"name":"g","arguments":{}}]`,
			[]Event{txt("Sure. "), tc("f", `{"a":1}`), tc("g", `{}`)}},
		{"named", `[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{}`, []Event{tc("f", `{"a":1}`), tc("g", `{}`)}},
		{"invalid", `x[TOOL_CALLS][{"name":"f"`, []Event{txt(`x[TOOL_CALLS][{"name":"f"`)}},
		{"named bad", `[TOOL_CALLS]a b[ARGS]{}`, []Event{txt(`[TOOL_CALLS]a b[ARGS]{}`)}},
		{"text", "[TOOL_CALL] no", []Event{txt("[TOOL_CALL] no")}},
		{"trailing text", `[TOOL_CALLS][{"name":"f","arguments":{}}] ok`, []Event{txt(`[TOOL_CALLS][{"name":"f","arguments":{}}] ok`)}},
	})
}

func TestPythonic(t *testing.T) {
	lit := `[f(a=True, b=None, c=(1, 2), d={'k': [1.5, -2, ()]}, e='it\'s', g=1e5, h=0x1_0, i="\x41\n", j=r'\d', k='a' "b", l=(3))]`
	runCases(t, "pythonic", []parseCase{
		{"two", ` [f(a=1, b="x"), g()]` + "\n", []Event{tc("f", `{"a":1,"b":"x"}`), tc("g", `{}`)}},
		{"literals", lit, []Event{tc("f",
			`{"a":true,"b":null,"c":[1,2],"d":{"k":[1.5,-2,[]]},"e":"it's","g":100000.0,"h":16,"i":"A\n","j":"\\d","k":"ab","l":3}`)}},
		{"multiline", "[f(\n  a=[1,\n 2],  # two\n)]", []Event{tc("f", `{"a":[1,2]}`)}},
		{"positional", `[f(1, a=2)]`, []Event{txt(`[f(1, a=2)]`)}},
		{"name", `[f(a=x)]`, []Event{txt(`[f(a=x)]`)}},
		{"empty list", `[]`, []Event{txt(`[]`)}},
		{"not calls", `[1, 2]`, []Event{txt(`[1, 2]`)}},
		{"text", `Hi [f()]`, []Event{txt(`Hi [f()]`)}},
		{"trailing", `[f()] ok`, []Event{txt(`[f()] ok`)}},
		{"bytes", `[f(a=b'x')]`, []Event{txt(`[f(a=b'x')]`)}},
		{"set", `[f(a={1, 2})]`, []Event{txt(`[f(a={1, 2})]`)}},
		{"double sign", `[f(a=--1)]`, []Event{txt(`[f(a=--1)]`)}},
	})
}

// TestMLC follows MLC-LLM's convert_function_str_to_json and
// process_function_call_output; each comment names the Python behaviour.
func TestMLC(t *testing.T) {
	runCases(t, "mlc", []parseCase{
		// ast.parse gives a Call of a Name: a call.
		{"call", `f(a=1, b="x")`, []Event{tc("f", `{"a":1,"b":"x"}`)}},
		{"no args", `f()`, []Event{tc("f", `{}`)}},
		// "[...]": ast.literal_eval gives a list of strings, each ast.parse'd.
		{"list", `["f(a=1)", 'g(b="y")']`, []Event{tc("f", `{"a":1}`), tc("g", `{"b":"y"}`)}},
		// literal_eval rejects a Call node: ValueError.
		{"pythonic list", `[f(a=1)]`, []Event{txt(`[f(a=1)]`)}},
		// Positional arguments sit in node.args, which MLC ignores.
		{"positional", `f(1, a=2)`, []Event{tc("f", `{"a":2}`)}},
		// ast.parse allows a repeated keyword; the dict keeps the last value.
		{"repeated", `f(a=1, a=2)`, []Event{tc("f", `{"a":2}`)}},
		// SyntaxError: positional argument follows keyword argument.
		{"positional after", `f(a=1, 2)`, []Event{txt(`f(a=1, 2)`)}},
		// IndentationError (a SyntaxError): unexpected indent.
		{"indent", ` f(a=1)`, []Event{txt(` f(a=1)`)}},
		// Blank and comment lines before, newlines after, parse.
		{"blank lines", "\n# c\nf(a=1)  # note\n", []Event{tc("f", `{"a":1}`)}},
		// A newline outside brackets ends the expression: SyntaxError.
		{"newline", "f\n(a=1)", []Event{txt("f\n(a=1)")}},
		{"newline in brackets", "f(a=[1,\n2])", []Event{tc("f", `{"a":[1,2]}`)}},
		// literal_eval of a Name: ValueError (malformed node).
		{"name value", `f(a=x)`, []Event{txt(`f(a=x)`)}},
		// A Name parses but is no Call: None, so no calls: the invalid-output error.
		{"word", `Hello`, []Event{txt(`Hello`)}},
		{"sentence", `Hello there, f(a=1)`, []Event{txt(`Hello there, f(a=1)`)}},
		// "42" parses and is dropped as None; the other element is a call.
		{"dropped element", `["f(a=1)", "42", "x"]`, []Event{tc("f", `{"a":1}`)}},
		// "hello world" is a SyntaxError: the whole output is invalid.
		{"bad element", `["f(a=1)", "hello world"]`, []Event{txt(`["f(a=1)", "hello world"]`)}},
		// s[-1] is "\n", not "]": ast.parse gives a List, not a Call.
		{"list then newline", "[\"f(a=1)\"]\n", []Event{txt("[\"f(a=1)\"]\n")}},
		// literal_eval gives [], no calls: the invalid-output error.
		{"empty list", `[]`, []Event{txt(`[]`)}},
		// An element that is not a string: ast.parse raises TypeError (MLC fails; we give text).
		{"int element", `[1]`, []Event{txt(`[1]`)}},
	})
}

// TestWholeHolding checks that llama3_json, pythonic and mlc hold only
// while the output could be a call, then stream on: mlc's prose goes out
// from its first words, its call's start is held.
func TestWholeHolding(t *testing.T) {
	for _, c := range []struct {
		format string
		pieces []string
		want   [][]Event
	}{
		{"llama3_json", []string{" ", "<|py", "x", "y"}, [][]Event{nil, nil, {txt(" <|pyx")}, {txt("y")}}},
		{"llama3_json", []string{"\n{", `"name"`}, [][]Event{nil, nil}},
		{"pythonic", []string{"\n", "[", "x"}, [][]Event{nil, nil, nil}},
		{"pythonic", []string{"\n", "I", " am"}, [][]Event{nil, {txt("\nI")}, {txt(" am")}}},
		{"mlc", []string{"Hello", " there"}, [][]Event{nil, {txt("Hello there")}}},
		{"mlc", []string{"get_", "weather", " (", "city="}, [][]Event{nil, nil, nil, nil}},
		{"mlc", []string{"\n", `["get_`, "weather("}, [][]Event{nil, nil, nil}},
		{"mlc", []string{"42"}, [][]Event{{txt("42")}}},
	} {
		p, _ := New(c.format)
		for i, s := range c.pieces {
			if got := p.Push(s); !reflect.DeepEqual(got, c.want[i]) {
				t.Errorf("%s: Push(%q) = %s, want %s", c.format, s, show(got), show(c.want[i]))
			}
		}
	}
}

func TestJSONFormat(t *testing.T) {
	runCases(t, JSON, []parseCase{
		{"arguments", `{"name":"f","arguments":{"a":[1,{"b":"}"}]}}`, []Event{tc("f", `{"a":[1,{"b":"}"}]}`)}},
		{"parameters, spaced", " \n{\"name\": \"g\", \"parameters\": {}}\n", []Event{tc("g", `{}`)}},
		{"one call only", `{"name":"f","arguments":{}}; {"name":"g","arguments":{}}`, []Event{txt(`{"name":"f","arguments":{}}; {"name":"g","arguments":{}}`)}},
		{"cut", `{"name":"f","arguments":{"a":`, []Event{txt(`{"name":"f","arguments":{"a":`)}},
		{"no name", `{"arguments":{}}`, []Event{txt(`{"arguments":{}}`)}},
		{"text", "Hello {x}", []Event{txt("Hello {x}")}},
	})
	if ArgumentsKey("llama3_json") != "parameters" || ArgumentsKey("hermes") != "arguments" || ArgumentsKey("mlc") != "arguments" {
		t.Errorf("ArgumentsKey")
	}
}
