// Package schematest checks JSON against JSON schemas with a real
// validator (santhosh-tekuri/jsonschema), not the grammar's own code: the
// judge of the tests of structured output and of required tool calls.
package schematest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile returns schema compiled, failing t if it is not a schema.
func Compile(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	return compile(t, schema, newCompiler())
}

// newCompiler is a compiler whose patterns are ECMA-262's, as JSON
// Schema's are (regexp2's ECMAScript mode, lookaround and \b
// included); one ECMA-262 does not read, Go's regexp reads.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(func(s string) (jsonschema.Regexp, error) {
		if re, err := regexp2.Compile(s, regexp2.ECMAScript|regexp2.Unicode); err == nil {
			return ecma{re}, nil
		}
		return regexp.Compile(s)
	})
	return c
}

// ecma is a regexp2 expression as the validator reads one.
type ecma struct{ re *regexp2.Regexp }

func (e ecma) MatchString(s string) bool {
	ok, err := e.re.MatchString(s)
	return ok && err == nil
}

func (e ecma) String() string { return e.re.String() }

// CompileFormats is Compile asserting formats (JSON Schema makes them
// annotations by default): a string of a format the validator knows
// must be one. A schema without $schema that draft 2020-12 does not
// read (an OpenAPI 3.0 schema's boolean exclusiveMaximum) is read as
// draft 4's; a reference outside the schema, as {} (nothing is fetched:
// the grammar writes nothing such a reference constrains).
func CompileFormats(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	s, err := TryCompileFormats(schema)
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s
}

// TryCompileFormats is CompileFormats returning its error.
func TryCompileFormats(schema string) (*jsonschema.Schema, error) {
	var s *jsonschema.Schema
	var err error
	for _, draft := range []*jsonschema.Draft{nil, jsonschema.Draft4} {
		c := newCompiler()
		c.AssertFormat()
		c.UseLoader(anything{})
		if draft != nil {
			c.DefaultDraft(draft)
		}
		var doc any
		if doc, err = jsonschema.UnmarshalJSON(strings.NewReader(schema)); err != nil {
			return nil, err
		}
		if err = c.AddResource("schema.json", doc); err != nil {
			continue
		}
		if s, err = c.Compile("schema.json"); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// anything loads any URL as the schema {}.
type anything struct{}

func (anything) Load(string) (any, error) { return map[string]any{}, nil }

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
