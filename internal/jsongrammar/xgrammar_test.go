package jsongrammar

import (
	"strings"
	"testing"
)

// TestCheckXGrammar: the schemas xgrammar's parser reads pass (keywords
// it ignores included); those it fails on, or checks fatally, are
// refused naming the keyword.
func TestCheckXGrammar(t *testing.T) {
	for _, ok := range []string{
		`{"type":"object","properties":{"a":{"type":"string","format":"email","minLength":1}},"required":["a"]}`,
		`{"type":"array","items":{"type":"integer"},"uniqueItems":true,"contains":{"const":1},"maxContains":2}`,
		`{"not":{"type":"string"},"if":{"type":"object"},"then":{"required":["a"]},"x-vendor":1}`,
		`{"$ref":"https://example.com/elsewhere.json"}`,
		`{"$defs":{"a":{"type":"integer","minimum":0,"maximum":10,"multipleOf":0.5}},"$ref":"#/$defs/a"}`,
		`{"type":["string","null"],"maxLength":3}`,
		`{"type":"number","minimum":1.5,"exclusiveMaximum":2}`,
		`{"oneOf":[{"type":"string"},{"type":"string"}]}`,
	} {
		if err := CheckXGrammar([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, c := range []struct{ schema, keyword string }{
		{`{"type":"integer","minimum":1.5}`, "minimum"},
		{`{"type":"integer","maximum":1e30}`, "maximum"},
		{`{"type":"integer","minimum":5,"maximum":3}`, "minimum"},
		{`{"type":"number","exclusiveMinimum":2,"maximum":2}`, "minimum"},
		{`{"type":"string","minLength":1.0}`, "minLength"},
		{`{"type":"string","minLength":4,"maxLength":3}`, "minLength"},
		{`{"type":"string","pattern":"(?<=a)b"}`, "pattern"},
		{`{"type":"array","minItems":2,"maxItems":1}`, "minItems"},
		{`{"type":"array","prefixItems":[{},{}],"items":false,"minItems":3}`, "minItems"},
		{`{"type":"object","required":[1]}`, "required"},
		{`{"type":"object","maxProperties":1,"required":["a","b"]}`, "maxProperties"},
		{`{"type":"object","propertyNames":{"type":"integer"}}`, "propertyNames"},
		{`{"$ref":"#/$defs/missing"}`, "$ref"},
		{`{"enum":[]}`, "enum"},
		{`{"type":"strin"}`, "type"},
		{`{"anyOf":{"type":"string"}}`, "anyOf"},
	} {
		err := CheckXGrammar([]byte(c.schema))
		se, ok := err.(*SchemaError)
		if !ok || se.Keyword != c.keyword {
			t.Errorf("%s: got %v, want an error naming %q", c.schema, err, c.keyword)
		}
	}
	if err := CheckXGrammar([]byte(`false`)); err == nil || !strings.Contains(err.Error(), "false") {
		t.Errorf("false: %v", err)
	}
}
