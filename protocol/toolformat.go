package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/internal/jsongrammar"
)

// A request that requires a tool call (chat's tool_choice "required", a
// named function or allowed_tools in mode "required", the Responses
// API's likewise, Anthropic's "any" and "tool") is served through the
// JSON grammar: its answer is one call object, {"name": <a tool's name>,
// "arguments": <that tool's parameters>}, and nothing else, so that the
// engine cannot write anything but a valid call. The format is MLC's
// RequestResponseFormat (a JSON schema), the one way to constrain MLC's
// engines too; the router reads the whole answer as that object
// (router/toolcall's JSON format), whatever syntax the model's template
// teaches for calls.

// Forced reports whether the choice requires a call.
func (t *ToolCalling) Forced() bool {
	return t != nil && (t.Choice == ToolChoiceRequired || t.Choice == ToolChoiceFunction)
}

// ToolCallFormat returns the response format of the call the request
// requires, nil when it requires none: a call of one of the tools it may
// call (all, the one named, or its AllowedTools). argsKey is the member
// that holds the arguments ("arguments", or "parameters" for Llama 3's
// syntax). A tool's schema the grammar cannot serve is a 400 naming its
// keyword, under the tool's parameter (ToolSchemaParams).
func (r *ChatCompletionRequest) ToolCallFormat(argsKey string) (*ResponseFormat, *Error) {
	choice, function := chatToolChoice(r.ToolChoice)
	if len(r.Tools) == 0 || (choice != ToolChoiceRequired && choice != ToolChoiceFunction) {
		return nil, nil
	}
	tools, e := r.callable(choice, function)
	if e != nil {
		return nil, e
	}
	var b toolSchema
	var calls []string
	for _, t := range tools {
		param := fmt.Sprintf("tools[%d].function.parameters", t.index)
		if t.index < len(r.ToolSchemaParams) {
			param = r.ToolSchemaParams[t.index]
		}
		params := t.params
		if !present(params) {
			params = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`) // no arguments
		}
		if _, e := engineSchema(param, params, r.Grammar); e != nil {
			return nil, e
		}
		args, err := b.hoist(fmt.Sprintf("tool%d_", t.index), params)
		if err != nil {
			return nil, InvalidRequest(param, "%s: %v", param, err).WithCode(CodeInvalidValue)
		}
		name, _ := json.Marshal(t.name)
		key, _ := json.Marshal(argsKey)
		calls = append(calls, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},%s:%s},"required":["name",%s],"additionalProperties":false}`, name, key, args, key))
	}
	switch {
	case len(calls) > 0:
	case r.AllowedTools != nil:
		return nil, InvalidRequest("tool_choice", "tool_choice allows no function among the request's tools").WithCode(CodeInvalidValue)
	default:
		return nil, InvalidRequest("tool_choice", "tool_choice names function %q, which is not among the request's tools", function).WithCode(CodeInvalidValue)
	}
	root := calls[0]
	if len(calls) > 1 {
		root = `{"anyOf":[` + strings.Join(calls, ",") + `]}`
	}
	schema := b.root(root)
	rf, e := engineSchema("tools", schema, r.Grammar)
	if e != nil {
		e.Message = "the tools together: " + e.Message
	}
	return rf, e
}

// callableTool is a function tool a required call may call.
type callableTool struct {
	index  int
	name   string
	params json.RawMessage
}

// callable returns the tools a required call may call: all, the one
// named, or the AllowedTools. Their parameters together past what the
// call schema may hold (it holds them all) are a 400 before any is
// compiled.
func (r *ChatCompletionRequest) callable(choice, function string) ([]callableTool, *Error) {
	var out []callableTool
	total := 0
	for i, raw := range r.Tools {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil {
			return nil, InvalidRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be a function tool", i).WithCode(CodeInvalidType)
		}
		if choice == ToolChoiceFunction && t.Function.Name != function ||
			r.AllowedTools != nil && !slices.Contains(r.AllowedTools, t.Function.Name) {
			continue
		}
		out = append(out, callableTool{i, t.Function.Name, t.Function.Parameters})
		total += len(t.Function.Parameters)
	}
	if total > jsongrammar.MaxSchemaBytes {
		return nil, InvalidRequest("tools", "the tools together: their parameters are %d bytes, more than the %d a call schema may hold (MaxSchemaBytes)", total, jsongrammar.MaxSchemaBytes).WithCode(CodeInvalidValue)
	}
	return out, nil
}

// toolSchema gathers the definitions of the tools' schemas, renamed so
// that each tool's stay its own once they all sit at the call schema's
// root (where a $ref "#/$defs/x" points).
type toolSchema struct {
	defs, definitions []string // "name":schema members
}

// hoist returns schema with its top-level $defs and definitions taken
// out (kept in b, renamed with prefix) and every $ref to them renamed;
// a schema without a type, a reference or alternatives is made an
// object's, as a call's arguments are.
func (b *toolSchema) hoist(prefix string, schema json.RawMessage) (string, error) {
	ms, ok := jsongrammar.Members(schema)
	if !ok {
		return "", fmt.Errorf("must be a JSON schema object")
	}
	rest := []jsongrammar.Member{{Key: "type", Value: json.RawMessage(`"object"`)}}
	for _, m := range ms {
		switch m.Key {
		case "type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const":
			rest = rest[:0] // typed: as written
		}
	}
	for _, m := range ms {
		if m.Key != "$defs" && m.Key != "definitions" {
			rest = append(rest, m)
			continue
		}
		defs, ok := jsongrammar.Members(m.Value)
		if !ok {
			return "", fmt.Errorf("%s must be an object", m.Key)
		}
		for _, d := range defs {
			v, err := renameRefs(prefix, d.Value)
			if err != nil {
				return "", err
			}
			k, _ := json.Marshal(prefix + d.Key)
			if m.Key == "$defs" {
				b.defs = append(b.defs, string(k)+":"+v)
			} else {
				b.definitions = append(b.definitions, string(k)+":"+v)
			}
		}
	}
	return writeObject(rest, func(m jsongrammar.Member) (string, error) { return schemaKeyword(prefix, m) })
}

// root is the call schema root with the definitions gathered.
func (b *toolSchema) root(root string) []byte {
	if len(b.defs) == 0 && len(b.definitions) == 0 {
		return []byte(root)
	}
	var out strings.Builder
	out.WriteString(root[:len(root)-1])
	if len(b.defs) > 0 {
		out.WriteString(`,"$defs":{` + strings.Join(b.defs, ",") + `}`)
	}
	if len(b.definitions) > 0 {
		out.WriteString(`,"definitions":{` + strings.Join(b.definitions, ",") + `}`)
	}
	out.WriteByte('}')
	return []byte(out.String())
}

// renameRefs returns the subschema raw with its references to top-level
// definitions renamed with prefix.
func renameRefs(prefix string, raw json.RawMessage) (string, error) {
	ms, ok := jsongrammar.Members(raw)
	if !ok {
		return compactString(raw)
	}
	return writeObject(ms, func(m jsongrammar.Member) (string, error) { return schemaKeyword(prefix, m) })
}

// schemaKeyword is the value of keyword m of a subschema with its
// references renamed. The values of the keywords that hold data (const,
// enum, default, examples) are left as they are.
func schemaKeyword(prefix string, m jsongrammar.Member) (string, error) {
	switch m.Key {
	case "$ref":
		var ref string
		if json.Unmarshal(m.Value, &ref) == nil {
			for _, under := range []string{"#/$defs/", "#/definitions/"} {
				if name, ok := strings.CutPrefix(ref, under); ok {
					b, _ := json.Marshal(under + prefix + name)
					return string(b), nil
				}
			}
		}
		return compactString(m.Value)
	case "const", "enum", "default", "examples":
		return compactString(m.Value)
	case "properties", "$defs", "definitions", "patternProperties", "dependentSchemas":
		named, ok := jsongrammar.Members(m.Value) // names to subschemas
		if !ok {
			return compactString(m.Value)
		}
		return writeObject(named, func(n jsongrammar.Member) (string, error) { return renameRefs(prefix, n.Value) })
	}
	var items []json.RawMessage // anyOf, prefixItems, a list of types, required…
	if json.Unmarshal(m.Value, &items) == nil && items != nil {
		parts := make([]string, len(items))
		for i, it := range items {
			s, err := renameRefs(prefix, it)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return "[" + strings.Join(parts, ",") + "]", nil
	}
	return renameRefs(prefix, m.Value)
}

// writeObject writes the members ms as a JSON object, each value as
// value makes it.
func writeObject(ms []jsongrammar.Member, value func(jsongrammar.Member) (string, error)) (string, error) {
	var out bytes.Buffer
	out.WriteByte('{')
	for i, m := range ms {
		v, err := value(m)
		if err != nil {
			return "", err
		}
		if i > 0 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		out.Write(k)
		out.WriteByte(':')
		out.WriteString(v)
	}
	out.WriteByte('}')
	return out.String(), nil
}

// compactString is raw compacted, an error when it is not JSON.
func compactString(raw []byte) (string, error) {
	s := compactJSON(raw)
	if s == "" {
		return "", fmt.Errorf("is not valid JSON")
	}
	return s, nil
}
