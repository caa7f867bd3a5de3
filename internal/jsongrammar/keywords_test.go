package jsongrammar

import (
	"math/rand/v2"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
)

// keywordSchemas exercise each keyword the grammar honours, alone and
// combined as generated schemas combine them.
var keywordSchemas = []string{
	// Annotations and unknown keywords pass.
	`{"$schema":"http://json-schema.org/draft-04/schema#","id":"http://example.com/p","type":"object","properties":{"a":{"type":"string","example":"x","x-kubernetes-preserve-unknown-fields":true,"readOnly":true,"title":"A","self":{"href":"x"}}},"required":["a"]}`,
	// Formats.
	`{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"day":{"type":"string","format":"date"},"at":{"type":"string","format":"time"},"for":{"type":"string","format":"duration"}},"required":["when","day","at","for"],"additionalProperties":false}`,
	`{"type":"object","properties":{"mail":{"type":"string","format":"email"},"host":{"type":"string","format":"hostname"},"v4":{"type":"string","format":"ipv4"},"v6":{"type":"string","format":"ipv6"},"id":{"type":"string","format":"uuid"},"link":{"type":"string","format":"uri"}},"required":["mail","host","v4","v6","id","link"]}`,
	`{"type":"array","items":{"type":"string","format":"uri-reference"},"minItems":2}`,
	`{"type":"array","items":{"anyOf":[{"type":"string","format":"json-pointer"},{"type":"string","format":"relative-json-pointer"},{"type":"string","format":"semver"}]},"minItems":3}`,
	`{"type":"string","format":"some-format-nobody-knows"}`,
	// Numbers.
	`{"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":130},"score":{"type":"number","exclusiveMinimum":-1.5,"exclusiveMaximum":2.25},"even":{"type":"integer","multipleOf":2,"minimum":-10,"maximum":10},"cents":{"type":"number","multipleOf":0.01,"minimum":0}},"required":["age","score","even","cents"]}`,
	`{"type":"number","minimum":5,"exclusiveMinimum":true,"maximum":6,"$schema":"http://json-schema.org/draft-04/schema#"}`,
	`{"type":"integer","format":"int32"}`,
	`{"type":"integer","exclusiveMinimum":2.5,"exclusiveMaximum":3.5}`,
	`{"type":"number","minimum":1e-3,"maximum":0.002}`,
	// Strings.
	`{"type":"string","minLength":30,"maxLength":40}`,
	`{"type":"string","minLength":2,"pattern":"^[a-c]+$","maxLength":4}`,
	`{"type":"string","pattern":"\\d{3}-\\d{4}"}`,
	`{"type":"string","pattern":"^(?i)yes|no$"}`,
	`{"type":"string","pattern":"^\\p{Lu}\\w*$","minLength":3}`,
	`{"type":"string","maxLength":0}`,
	`{"type":"string","pattern":"^\\s*[Ss][Ee][Ll][Ee][Cc][Tt]\\b"}`,
	`{"type":"string","pattern":"\\bcat\\b","maxLength":12}`,
	`{"type":"string","pattern":"^a\\Bb","maxLength":6}`,
	`{"type":"string","pattern":"^(?!^[-+.]*$)[+-]?0*\\d*\\.?\\d*$"}`,
	// Arrays.
	`{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"minItems":3}`,
	`{"type":"array","items":[{"type":"integer"},{"enum":["a"]}],"additionalItems":false,"$schema":"http://json-schema.org/draft-07/schema#"}`,
	`{"type":"array","items":{"enum":["red","green","blue"]},"uniqueItems":true,"minItems":3}`,
	`{"type":"array","items":{"type":"integer","minimum":0,"maximum":3},"uniqueItems":true,"minItems":2}`,
	`{"type":"array","items":{"type":"string","maxLength":2},"uniqueItems":true,"minItems":4}`,
	`{"type":"array","items":{"type":"object","properties":{"k":{"type":"boolean"}}},"uniqueItems":true,"minItems":2,"maxItems":3}`,
	`{"type":"array","contains":{"type":"string","pattern":"^x"},"minContains":2,"items":{"type":["string","integer"]}}`,
	// Objects.
	`{"type":"object","patternProperties":{"^s_":{"type":"string"},"^n_":{"type":"number"}},"additionalProperties":false,"minProperties":2}`,
	`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"string","maxLength":3}}`,
	`{"type":"object","propertyNames":{"pattern":"^[a-z]{1,5}$"},"additionalProperties":{"type":"integer"},"minProperties":3}`,
	`{"type":"object","propertyNames":{"enum":["a","b","c"]},"minProperties":2}`,
	`{"type":"object","properties":{"card":{"type":"string"},"billing":{"type":"string"},"name":{"type":"string"}},"dependentRequired":{"card":["billing"]}}`,
	`{"type":"object","properties":{"a":{},"b":{},"c":{}},"dependencies":{"c":["a"]},"minProperties":1,"maxProperties":2}`,
	`{"type":"object","properties":{"a":{"type":"integer"}},"unevaluatedProperties":false}`,
	`{"type":"object","allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]}],"properties":{"b":{"type":"string"}},"unevaluatedProperties":false}`,
	`{"type":"object","required":["x"],"additionalProperties":{"type":"boolean"}}`,
	// Conditionals, negation, dependent schemas.
	`{"type":"object","properties":{"country":{"enum":["US","CA"]},"zip":{"type":"string"}},"required":["country","zip"],"if":{"properties":{"country":{"const":"US"}}},"then":{"properties":{"zip":{"pattern":"^[0-9]{5}$"}}},"else":{"properties":{"zip":{"pattern":"^[A-Z][0-9][A-Z] [0-9][A-Z][0-9]$"}}}}`,
	`{"type":"string","not":{"enum":["admin","root"]},"maxLength":5}`,
	`{"type":"integer","not":{"const":3},"minimum":1,"maximum":5}`,
	`{"not":{"type":["string","number","array","object"]}}`,
	`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"not":{"required":["a","b"]},"minProperties":1}`,
	`{"type":"object","properties":{"credit":{"type":"string"},"address":{"type":"string"}},"dependentSchemas":{"credit":{"required":["address"]}}}`,
	// const and enum of any JSON, recursion.
	`{"enum":[{"a":[1,{"b":null}]},[true,"x"],3.5,"s",null]}`,
	`{"const":{"z":1,"a":[2]}}`,
	`{"$defs":{"tree":{"type":"object","properties":{"v":{"type":"integer","minimum":0},"kids":{"type":"array","items":{"$ref":"#/$defs/tree"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/tree"}`,
	`{"definitions":{"n":{"anyOf":[{"type":"null"},{"type":"object","properties":{"next":{"$ref":"#/definitions/n"}},"required":["next"]}]}},"$ref":"#/definitions/n"}`,
	`{"type":"object","properties":{"a":{"type":"integer"},"b":{"$ref":"#/properties/a"}},"required":["b"]}`,
	// Free JSON.
	`{"type":"object"}`,
	`{}`,
}

// TestKeywordsValidate: texts generated under each schema validate
// against it by an independent validator, formats asserted.
func TestKeywordsValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, schema := range keywordSchemas {
		texts, err := checkBounds(t, schema, 25, rng)
		if err != nil {
			t.Errorf("%.200s: %v", schema, err)
			continue
		}
		v := schematest.CompileFormats(t, schema)
		for _, text := range texts {
			schematest.Validate(t, v, "text of "+schema, text)
		}
	}
}

// TestKeywordsRefuse: texts a schema refuses are dead in its automaton.
func TestKeywordsRefuse(t *testing.T) {
	for _, c := range []struct {
		schema string
		bad    []string
	}{
		{`{"type":"integer","minimum":0,"maximum":130}`, []string{"-1", "131", "1000"}},
		{`{"type":"number","multipleOf":0.01}`, []string{"0.001", "1.234"}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-30"`, `"2024-13-01"`, `"24-01-01"`}},
		{`{"type":"string","minLength":3}`, []string{`"ab"`}},
		{`{"type":"string","pattern":"\\bcat\\b"}`, []string{`"concat"`, `"cats"`, `"dog"`}},
		{`{"type":"string","pattern":"^(?!^[-+.]*$)[+-]?0*\\d*\\.?\\d*$"}`, []string{`"-"`, `""`, `"+."`}},
		{`{"type":"array","items":{"enum":["a","b"]},"uniqueItems":true}`, []string{`["a","a"]`}},
		{`{"type":"object","patternProperties":{"^s_":{"type":"string"}},"additionalProperties":false}`, []string{`{"x":1}`, `{"s_a":1}`}},
		{`{"type":"object","properties":{"card":{},"billing":{}},"dependentRequired":{"card":["billing"]}}`, []string{`{"card":1}`}},
	} {
		g, err := CompileSchema([]byte(c.schema), Bounds{})
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		a := NewAutomaton(g, nil)
		for _, bad := range c.bad {
			if a.Feed(a.Start(), bad).CanEnd() {
				t.Errorf("%s: %s is accepted", c.schema, bad)
			}
		}
	}
}

// TestKeywordsDistinct: a Distinct refuses a repeated item of an array
// under uniqueItems (by value: 1.0 repeats 1, {"a":1,"b":2} repeats
// {"b":2,"a":1}) and a repeated key of an object.
func TestKeywordsDistinct(t *testing.T) {
	for _, c := range []struct {
		schema, prefix, next string
		refused              bool
	}{
		{`{"type":"array","items":{"type":"number"},"uniqueItems":true}`, `[1,2.5,`, `1]`, true},
		{`{"type":"array","items":{"type":"number"},"uniqueItems":true}`, `[1,2.5,`, `3]`, false},
		{`{"type":"array","items":{"type":"number"},"uniqueItems":true}`, `[1.0,`, `1,`, true},
		{`{"type":"array","items":{"type":"object"},"uniqueItems":true}`, `[{"a":1,"b":2},`, `{"b":2,"a":1}]`, true},
		{`{"type":"array","items":{"type":"array"},"uniqueItems":true}`, `[[1,[2]],`, `[1,[3]]]`, false},
		{`{"type":"array","items":{"type":"string"}}`, `["x",`, `"x"]`, false},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"a":1,`, `"a":2}`, true},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"a":1,`, `"b":2}`, false},
		{`{"type":"array","items":{"type":"string"},"uniqueItems":true}`, `["a\"b",`, `"a\u0022b"]`, true},
	} {
		g, err := CompileSchema([]byte(c.schema), Bounds{})
		if err != nil {
			t.Fatal(err)
		}
		a := NewAutomaton(g, nil)
		d := &Distinct{}
		s, ok := d.Feed(a, a.Start(), c.prefix)
		if !ok || s.Dead() {
			t.Fatalf("%s: %s refused", c.schema, c.prefix)
		}
		if got := d.Refuses(a, s, c.next); got != c.refused {
			t.Errorf("%s: after %s, %s refused %v, want %v", c.schema, c.prefix, c.next, got, c.refused)
		}
		// The dry run left d as it was.
		if got := d.Refuses(a, s, c.next); got != c.refused {
			t.Errorf("%s: a second dry run of %s refused %v", c.schema, c.next, got)
		}
		if _, ok := d.Feed(a, s, c.next); ok == c.refused {
			t.Errorf("%s: feeding %s ok %v", c.schema, c.next, ok)
		}
	}
}

// TestKeywordsLiteralsAsWritten: enum and const values are written as
// given, a large integer's digits kept.
func TestKeywordsLiteralsAsWritten(t *testing.T) {
	g, err := CompileSchema([]byte(`{"enum":[12345678901234567891,1.50,"\u00e9"]}`), Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAutomaton(g, nil)
	for _, text := range []string{`12345678901234567891`, `1.50`, `"é"`} {
		if !a.Feed(a.Start(), text).CanEnd() {
			t.Errorf("%s is not written", text)
		}
	}
	if a.Feed(a.Start(), `12345678901234567000`).CanEnd() {
		t.Error("the integer is written rounded")
	}
}
