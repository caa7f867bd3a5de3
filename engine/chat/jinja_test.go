package chat

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustJinja(t *testing.T, src string, vars map[string]any) Template {
	t.Helper()
	tmpl, err := FromJinja(src, vars)
	if err != nil {
		t.Fatalf("FromJinja: %v", err)
	}
	return tmpl
}

func TestJinjaMessageFields(t *testing.T) {
	const src = `{{ bos_token }}{% for m in messages %}[{{ m.role }}{% if m.name is defined %}({{ m.name }}){% endif %}:{{ m.content }}` +
		`{% if m.tool_calls %}{% for c in m.tool_calls %}<{{ c.function.name }} {{ c.function.arguments | tojson }}>{% endfor %}{% endif %}` +
		`{% if m.tool_call_id is defined %}#{{ m.tool_call_id }}{% endif %}]{% endfor %}{% if add_generation_prompt %}>{% endif %}`
	tmpl := mustJinja(t, src, map[string]any{"bos_token": "<s>"})
	msgs := []Message{
		{Role: "user", Name: "bob", Content: PartsContent(textPart("a"), textPart("b"))},
		{Role: "assistant", Content: Content{Null: true}, ToolCalls: []json.RawMessage{
			json.RawMessage(`{"type":"function","function":{"name":"f","arguments":{"z":1,"a":[true,null,"ü"]}}}`),
		}},
		{Role: "tool", Content: Content{Text: "r"}, ToolCallID: "c1"},
	}
	got, err := tmpl.Render(msgs, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	// Object keys keep the client's order in tojson ("z" before "a").
	want := `<s>[user(bob):ab][assistant:<f {"z": 1, "a": [true, null, "ü"]}>][tool:r#c1]>`
	if got != want {
		t.Errorf("Render:\n got %q\nwant %q", got, want)
	}
}

func TestJinjaTools(t *testing.T) {
	tool := json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{"b":1,"a":2}}}`)
	withTools := mustJinja(t, `{% if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}{{ messages[0].content }}`, nil)
	got, err := withTools.Render([]Message{user("x")}, Options{Tools: []json.RawMessage{tool}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": 2}}}x`; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	// Without tools in the request the template sees tools undefined.
	if got, err := withTools.Render([]Message{user("x")}, Options{}); err != nil || got != "x" {
		t.Errorf("Render without tools = %q, %v; want \"x\"", got, err)
	}

	// "tools" only in text or a string literal is not a read.
	noTools := mustJinja(t, `tools: {{ 'tools' }}{{ messages[0].content }}`, nil)
	_, err = noTools.Render([]Message{user("x")}, Options{Tools: []json.RawMessage{tool}})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Render with tools on a template that ignores them: err = %v, want ErrUnsupported", err)
	}
	_, err = withTools.Render([]Message{user("x")}, Options{Tools: []json.RawMessage{json.RawMessage(`{"type":`)}})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Render with malformed tool: err = %v, want ErrUnsupported", err)
	}
}

func TestJinjaVars(t *testing.T) {
	tmpl := mustJinja(t, `{{ greeting }}{% if enable_thinking is defined and enable_thinking is false %}!{% endif %}`, map[string]any{"greeting": "hi"})
	got, err := tmpl.Render(nil, Options{Vars: map[string]any{"enable_thinking": false}})
	if err != nil || got != "hi!" {
		t.Errorf("Render = %q, %v; want \"hi!\"", got, err)
	}
	// Request variables override the template's own.
	got, err = tmpl.Render(nil, Options{Vars: map[string]any{"greeting": json.RawMessage(`"yo"`)}})
	if err != nil || got != "yo" {
		t.Errorf("Render = %q, %v; want \"yo\"", got, err)
	}
	for _, vars := range []map[string]any{
		{"unknown": 1},
		{"messages": []any{}},
		{"add_generation_prompt": true},
	} {
		if _, err := tmpl.Render(nil, Options{Vars: vars}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Render with vars %v: err = %v, want ErrUnsupported", vars, err)
		}
	}
}

func TestJinjaErrors(t *testing.T) {
	if _, err := FromJinja(`{% if %}`, nil); err == nil {
		t.Error("FromJinja of a broken template succeeded")
	}
	alternate := mustJinja(t, `{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}`+
		`{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{{ m.content }}{% endfor %}`, nil)
	_, err := alternate.Render([]Message{user("a"), user("b")}, Options{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "must alternate") {
		t.Errorf("raise_exception: err = %v, want ErrUnsupported with the template's message", err)
	}
	// A template bug is not the client's fault.
	buggy := mustJinja(t, `{{ messages | no_such_filter }}`, nil)
	if _, err := buggy.Render(nil, Options{}); err == nil || errors.Is(err, ErrUnsupported) {
		t.Errorf("template bug: err = %v, want an error that is not ErrUnsupported", err)
	}
	plain := mustJinja(t, `{{ messages[0].content }}`, nil)
	_, err = plain.Render([]Message{{Role: "user", Content: PartsContent(ContentPart{Type: "image_url", ImageURL: json.RawMessage(`{"url":"x"}`)})}}, Options{})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("image part: err = %v, want ErrUnsupported", err)
	}
}

func TestJinjaStopStrings(t *testing.T) {
	tmpl := mustJinja(t, `{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}`, map[string]any{"eos_token": "<|endoftext|>"})
	if got, want := tmpl.StopStrings(), []string{"<|endoftext|>", "<|im_end|>"}; !slices.Equal(got, want) {
		t.Errorf("StopStrings = %q, want %q", got, want)
	}
}

func TestJinjaConcurrent(t *testing.T) {
	tmpl := mustJinja(t, `{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}{{ ns.n }}`, nil)
	done := make(chan string)
	for range 8 {
		go func() {
			got, _ := tmpl.Render([]Message{user("a"), assistant("b")}, Options{})
			done <- got
		}()
	}
	for range 8 {
		if got := <-done; got != "ab2" {
			t.Errorf("concurrent Render = %q, want \"ab2\"", got)
		}
	}
}
