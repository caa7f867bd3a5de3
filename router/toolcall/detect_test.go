package toolcall

import (
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{- "<tool_call>\n" + tool_call | tojson + "\n</tool_call>" }}`, "hermes"},
		{`{{- "[TOOL_CALLS]" + tool_calls | tojson }}`, "mistral"},
		{`Respond as [func_name1(params_name1=params_value1, params_name2=params_value2...)] {%- if message.role == "ipython" %}`, "pythonic"},
		{`{{- "<|python_tag|>" }}`, "llama3_json"},
		{`{"name": function name, "parameters": dictionary} {%- if message.role == "ipython" %}`, "llama3_json"},
		{`{{ message.content }}`, ""},
	} {
		if got := Detect(c.src); got != c.want {
			t.Errorf("Detect(%q) = %q, want %q", c.src, got, c.want)
		}
	}
}

func TestNew(t *testing.T) {
	for _, f := range Formats() {
		if _, err := New(f); err != nil {
			t.Errorf("New(%q): %v", f, err)
		}
	}
	_, err := New("nope")
	if err == nil || !strings.Contains(err.Error(), strings.Join(Formats(), ", ")) {
		t.Errorf("New(nope) error %v should list the formats", err)
	}
}
