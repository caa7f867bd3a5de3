package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/internal/jsongrammar"
)

// Response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ResponseFormat constrains the generated text: MLC's
// RequestResponseFormat ({"type": "json_object", "schema": "<a JSON
// schema as a string>"}), which the router sends engines, and what
// clients send: OpenAI's chat json_schema ({"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}}) too.
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type string `json:"type"`
	// Schema is an optional JSON schema, as a string (MLC's).
	Schema *string `json:"schema,omitempty"`
	// JSONSchema is the schema of type json_schema (OpenAI's).
	JSONSchema *JSONSchemaFormat `json:"json_schema,omitempty"`
	// ResumedTokens is caddy-mlc's extension, read by the built-in
	// engine: the last ResumedTokens tokens of the prompt are the answer
	// generated so far (a resumed attempt), so the grammar starts after
	// them. MLC's engines ignore it, and start the grammar anew there.
	ResumedTokens int `json:"resumed_tokens,omitempty"`
}

// JSONSchemaFormat is OpenAI's json_schema response format.
type JSONSchemaFormat struct {
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// SchemaGrammar is the grammar engine that compiles a response format's
// schema on the engines that serve a request: a schema is checked as it
// does, refused where it fails and forwarded where it does not.
type SchemaGrammar uint8

const (
	// GrammarBuiltin is the built-in engine's (internal/jsongrammar),
	// under the bounds it generates within.
	GrammarBuiltin SchemaGrammar = iota
	// GrammarXGrammar is MLC's engines' (xgrammar): it reads more, and
	// honours less (see docs/structured-output.md).
	GrammarXGrammar
)

// Engine checks the format as the built-in engine reads it: EngineFor
// with GrammarBuiltin.
func (f *ResponseFormat) Engine(param string) (*ResponseFormat, *Error) {
	return f.EngineFor(param, GrammarBuiltin)
}

// EngineFor checks the format and returns it as an engine reads it: nil
// for text, else type json_object with the schema, if any, as a string:
// json_object's own string as it is, json_schema's schema compacted.
// param names the format in errors ("response_format", "text.format");
// a schema g cannot compile is a 400 whose param ends with the
// keyword's path.
func (f *ResponseFormat) EngineFor(param string, g SchemaGrammar) (*ResponseFormat, *Error) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case FormatText:
		return nil, nil
	case FormatJSONObject:
		if f.Schema == nil {
			return &ResponseFormat{Type: FormatJSONObject}, nil
		}
		rf, e := engineSchema(param+".schema", []byte(*f.Schema), g)
		if e != nil {
			return nil, e
		}
		// MLC's own form goes on as the client wrote it, as MLC's
		// entrypoint hands it to its engine.
		s := *f.Schema
		rf.Schema = &s
		return rf, nil
	case FormatJSONSchema:
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
			return nil, InvalidRequest(param+".json_schema.schema", "%s.json_schema.schema is required with type json_schema", param).WithCode(CodeInvalidValue)
		}
		return engineSchema(param+".json_schema.schema", f.JSONSchema.Schema, g)
	}
	return nil, InvalidRequest(param+".type", `%s.type must be "text", "json_object" or "json_schema", got %q`, param, f.Type).WithCode(CodeInvalidValue)
}

// TextFormat is the Responses API's text.format: OpenAI's flattened
// json_schema ({"type": "json_schema", "name", "schema", "strict"}).
type TextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponseFormat returns the format as chat's response_format, nil for text.
func (t TextFormat) ResponseFormat() *ResponseFormat {
	switch t.Type {
	case "", FormatText:
		return nil
	case FormatJSONSchema:
		return &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchemaFormat{Name: t.Name, Description: t.Description, Schema: t.Schema, Strict: t.Strict}}
	}
	return &ResponseFormat{Type: t.Type}
}

// Check checks the format as EngineFor does, its errors named by the
// Responses API's fields.
func (t TextFormat) Check(g SchemaGrammar) *Error {
	if t.Type == FormatJSONSchema {
		if len(t.Schema) == 0 {
			return InvalidRequest("text.format.schema", "text.format.schema is required with type json_schema").WithCode(CodeInvalidValue)
		}
		_, e := engineSchema("text.format.schema", t.Schema, g)
		return e
	}
	_, e := t.ResponseFormat().EngineFor("text.format", g)
	return e
}

// engineSchema checks schema as g will (the built-in engine compiles it
// under the bounds it generates within), to refuse what the engines
// cannot compile before one is asked.
func engineSchema(param string, schema []byte, g SchemaGrammar) (*ResponseFormat, *Error) {
	var err error
	switch g {
	case GrammarXGrammar:
		err = jsongrammar.CheckXGrammar(schema)
	default:
		_, err = jsongrammar.CompileSchema(schema, jsongrammar.BuiltinBounds())
	}
	if err != nil {
		var se *jsongrammar.SchemaError
		if errors.As(err, &se) && se.Keyword != "" {
			return nil, InvalidRequest(param+strings.ReplaceAll(se.Path, "/", "."), "%s: %v", param, err).WithCode(CodeUnsupportedValue)
		}
		return nil, InvalidRequest(param, "%s: %v", param, err).WithCode(CodeInvalidValue)
	}
	var b bytes.Buffer
	_ = json.Compact(&b, schema)
	s := b.String()
	return &ResponseFormat{Type: FormatJSONObject, Schema: &s}, nil
}
