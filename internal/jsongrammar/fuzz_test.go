package jsongrammar

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/hostile"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzSchemaBounds: any schema compiles, or is refused, within the time
// and allocation limits; one that compiles generates texts token by
// token, each mask within the limits and never stuck, and the texts
// validate against the schema (where the validator reads it).
func FuzzSchemaBounds(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}`,
		`{"anyOf":[{"type":"string","pattern":"^[a-z]+\\d?$"},{"type":"array","items":{"$ref":"#"},"maxItems":2}]}`,
		`{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"}`,
		`{"oneOf":[{"const":"a"},{"enum":[1,2,{"x":[true]}]}],"title":"t"}`,
		`{"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string","pattern":"(ab|c)+"}}}],"additionalProperties":false}`,
		hostile.NestedAnyOf(4, 4, `{"type":"string"}`),
		`{"type":"string","pattern":"^` + strings.Repeat("a{0,9}", 9) + `$"}`,
		`{"type":"object","additionalProperties":{"type":"array","items":{"type":"number"},"minItems":2}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		rng := rand.New(rand.NewPCG(uint64(len(schema)), 3))
		texts, err := checkBounds(t, schema, 2, rng)
		if err != nil {
			if _, ok := err.(*SchemaError); !ok {
				t.Fatalf("%q: an error that is not a SchemaError: %v", schema, err)
			}
			return
		}
		v := validator(schema)
		for _, text := range texts {
			if v != nil {
				schematest.Validate(t, v, "text", text)
			} else {
				schematest.Validate(t, nil, "text", text)
			}
		}
	})
}

// validator is the schema compiled by the independent validator, nil
// where it does not read it.
func validator(schema string) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	if c.AddResource("schema.json", doc) != nil {
		return nil
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		return nil
	}
	return s
}
