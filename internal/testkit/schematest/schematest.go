// Package schematest checks JSON against JSON schemas with a real
// validator (santhosh-tekuri/jsonschema), not the grammar's own code: the
// judge of the tests of structured output and of required tool calls.
package schematest

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile returns schema compiled, failing t if it is not a schema.
func Compile(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	return compile(t, schema, jsonschema.NewCompiler())
}

// CompileFormats is Compile asserting formats (JSON Schema makes them
// annotations by default): a string of a format the validator knows
// must be one.
func CompileFormats(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	return compile(t, schema, c)
}

func compile(t testing.TB, schema string, c *jsonschema.Compiler) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s
}

// Validate fails t unless text is JSON that s accepts, and returns its
// value; what names the text in the failure.
func Validate(t testing.TB, s *jsonschema.Schema, what, text string) any {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s %q is not JSON: %v", what, text, err)
	}
	if s != nil {
		if err := s.Validate(doc); err != nil {
			t.Fatalf("%s %q does not validate: %v", what, text, err)
		}
	}
	return doc
}

// Check is Validate against schema, compiled; "" checks only that text
// is JSON.
func Check(t testing.TB, what, text, schema string) any {
	t.Helper()
	var s *jsonschema.Schema
	if schema != "" {
		s = Compile(t, schema)
	}
	return Validate(t, s, what, text)
}

// Valid reports whether text is JSON that s accepts.
func Valid(s *jsonschema.Schema, text string) bool {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	return err == nil && s.Validate(doc) == nil
}
