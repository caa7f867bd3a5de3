package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ardanlabs/jinja"
)

// jinjaTemplate is a Hugging Face style chat_template. It is rendered by
// github.com/ardanlabs/jinja, a Jinja engine written for chat templates
// that already provides the Hugging Face extensions (raise_exception,
// strftime_now, a Python-compatible tojson, namespace, Python string
// methods, slicing). The only addition here is raise_exception's error
// type, so that a template's own refusal becomes ErrUnsupported.
type jinjaTemplate struct {
	tmpl  *jinja.Template
	vars  map[string]jinja.Value
	names map[string]bool // identifiers the template's code mentions
	src   string
	stop  []string
}

// reservedVars are the variables Render sets itself.
var reservedVars = []string{"messages", "tools", "add_generation_prompt", "raise_exception"}

// endOfTurnMarkers are end-of-turn strings of common chat formats. Those
// that appear in a template's source are among its StopStrings.
var endOfTurnMarkers = []string{
	"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
	"<|end_of_turn|>", "<|END_OF_TURN_TOKEN|>", "<|endoftext|>", "</s>",
}

// FromJinja compiles a Jinja chat template, such as tokenizer_config.json's
// chat_template. vars are template-level variables, typically bos_token
// and eos_token; a json.RawMessage value is decoded as JSON.
//
// Render passes the template the Hugging Face variables: messages (each
// with role, content as a string, and name, tool_calls and tool_call_id
// when set), add_generation_prompt, tools when the request has any, and
// the request's Options.Vars. Array content reaches the template as its
// text parts concatenated, so templates written for string content work.
//
// StopStrings returns vars["eos_token"] (when a string) and the common
// end-of-turn markers, such as "<|eot_id|>" and "<|im_end|>", that occur
// in src.
func FromJinja(src string, vars map[string]any) (Template, error) {
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat: compiling chat template: %w", err)
	}
	t := &jinjaTemplate{
		tmpl:  tmpl,
		vars:  make(map[string]jinja.Value, len(vars)),
		names: codeIdentifiers(src),
		src:   src,
	}
	for k, v := range vars {
		val, err := toValue(v)
		if err != nil {
			return nil, fmt.Errorf("chat: template variable %q: %w", k, err)
		}
		t.vars[k] = val
	}
	if eos, ok := vars["eos_token"].(string); ok && eos != "" {
		t.stop = append(t.stop, eos)
	}
	for _, m := range endOfTurnMarkers {
		if strings.Contains(src, m) && !slices.Contains(t.stop, m) {
			t.stop = append(t.stop, m)
		}
	}
	return t, nil
}

// StopStrings returns the eos token and the end-of-turn markers the
// template writes.
func (t *jinjaTemplate) StopStrings() []string { return t.stop }

// Render renders the template for msgs. Tools or a variable the template
// never mentions, non-text content parts, and a raise_exception in the
// template are errors wrapping ErrUnsupported.
func (t *jinjaTemplate) Render(msgs []Message, opts Options) (string, error) {
	data := maps.Clone(t.vars)
	if data == nil {
		data = make(map[string]jinja.Value)
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Vars)) {
		if slices.Contains(reservedVars, k) {
			return "", fmt.Errorf("chat: template variable %q is set by the server, not the request: %w", k, ErrUnsupported)
		}
		if !t.names[k] {
			return "", fmt.Errorf("chat: the chat template does not read variable %q: %w", k, ErrUnsupported)
		}
		v, err := toValue(opts.Vars[k])
		if err != nil {
			return "", fmt.Errorf("chat: template variable %q: %v: %w", k, err, ErrUnsupported)
		}
		data[k] = v
	}
	if len(opts.Tools) > 0 {
		if !t.names["tools"] {
			return "", fmt.Errorf("chat: the chat template does not read tools: %w", ErrUnsupported)
		}
		tools := make([]jinja.Value, len(opts.Tools))
		for i, raw := range opts.Tools {
			v, err := jsonValue(raw)
			if err != nil {
				return "", fmt.Errorf("chat: tools[%d]: %v: %w", i, err, ErrUnsupported)
			}
			tools[i] = v
		}
		data["tools"] = jinja.NewList(tools)
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		v, err := messageValue(m)
		if err != nil {
			return "", fmt.Errorf("chat: messages[%d]: %w", i, err)
		}
		list[i] = v
	}
	data["messages"] = jinja.NewList(list)
	data["add_generation_prompt"] = jinja.NewBool(opts.AddGenerationPrompt)
	data["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)

	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		var te *templateError
		if errors.As(err, &te) {
			return "", fmt.Errorf("chat: the chat template rejected the conversation: %w: %w", err, ErrUnsupported)
		}
		return "", fmt.Errorf("chat: rendering chat template: %w", err)
	}
	return out, nil
}

// templateError is the error of a template's raise_exception call.
type templateError struct{ msg string }

func (e *templateError) Error() string { return e.msg }

// raiseException replaces the library's raise_exception so that the
// error it returns can be told apart from a bug in the template.
func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := "raise_exception"
	if len(args) > 0 {
		msg = args[0].String()
	}
	return jinja.Undefined(), &templateError{msg: msg}
}

// messageValue converts m into the dict a chat template sees.
func messageValue(m Message) (jinja.Value, error) {
	content, err := m.Content.plainText()
	if err != nil {
		return jinja.Value{}, err
	}
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(content))
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, raw := range m.ToolCalls {
			c, err := jsonValue(raw)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("tool_calls[%d]: %v: %w", i, err, ErrUnsupported)
			}
			calls[i] = c
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	return v, nil
}

// toValue converts a Go value for the template; json.RawMessage is
// decoded keeping its key order.
func toValue(v any) (jinja.Value, error) {
	switch v := v.(type) {
	case json.RawMessage:
		return jsonValue(v)
	case jinja.Value:
		return v, nil
	}
	return jinja.FromGoValue(v), nil
}

// jsonValue decodes a JSON value into a template value, keeping object
// keys in their original order so that tojson writes them back as the
// client sent them (jinja.FromGoValue sorts map keys). Integers stay
// integers.
func jsonValue(raw json.RawMessage) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			var items []jinja.Value
			for dec.More() {
				item, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, item)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
		v := jinja.NewDict()
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return jinja.Value{}, err
			}
			item, err := decodeValue(dec)
			if err != nil {
				return jinja.Value{}, err
			}
			v.AsDict().Set(key.(string), item)
		}
		_, err := dec.Token()
		return v, err
	default:
		return jinja.FromGoValue(t), nil
	}
}

var (
	// codeBlock matches the code of {{ ... }} and {% ... %} tags.
	codeBlock = regexp.MustCompile(`(?s)\{\{(.*?)\}\}|\{%(.*?)%\}`)
	// stringLiteral matches Jinja string literals, which may contain
	// words that are not variables.
	stringLiteral = regexp.MustCompile(`(?s)"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	identifier    = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// codeIdentifiers returns the identifiers that occur in the code of src,
// outside string literals and comments. A template "reads" a variable,
// for Render's checks, when its name is among them: a deliberate
// over-approximation (an attribute named tools counts too), since
// refusing a request the template could have rendered is worse than
// passing a variable it then ignores.
func codeIdentifiers(src string) map[string]bool {
	names := make(map[string]bool)
	for _, m := range codeBlock.FindAllStringSubmatch(src, -1) {
		code := stringLiteral.ReplaceAllString(m[1]+" "+m[2], " ")
		for _, id := range identifier.FindAllString(code, -1) {
			names[id] = true
		}
	}
	return names
}

// Reads reports whether the template's code mentions variable name.
func (t *jinjaTemplate) Reads(name string) bool { return t.names[name] }

// Source returns the template's text.
func (t *jinjaTemplate) Source() string { return t.src }
