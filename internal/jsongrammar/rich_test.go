package jsongrammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
)

// richSchema is a random schema of the keywords generated schemas
// combine, nested up to depth 3.
func richSchema(rng *rand.Rand, depth int) map[string]any {
	leaf := func() map[string]any {
		switch rng.IntN(12) {
		case 0:
			return map[string]any{"type": "string", "format": []string{"date-time", "email", "uuid", "ipv4", "date", "hostname", "uri"}[rng.IntN(7)]}
		case 1:
			lo := rng.IntN(20) - 10
			return map[string]any{"type": "integer", "minimum": lo, "maximum": lo + rng.IntN(30), "multipleOf": 1 + rng.IntN(3)}
		case 2:
			return map[string]any{"type": "number", "exclusiveMinimum": rng.Float64()*10 - 5, "maximum": 10.5}
		case 3:
			lo := rng.IntN(5)
			return map[string]any{"type": "string", "minLength": lo, "maxLength": lo + rng.IntN(5)}
		case 4:
			return map[string]any{"type": "string", "pattern": []string{"^[a-c]+$", "\\d", "^(ab|c)*$", "x\\b", "^[A-Z][a-z]{0,4}$"}[rng.IntN(5)]}
		case 5:
			return map[string]any{"enum": []any{"a", 1, true, nil, "b", 2.5}[:1+rng.IntN(6)]}
		case 6:
			return map[string]any{"not": map[string]any{"type": "string"}}
		case 7:
			return map[string]any{"type": "string", "not": map[string]any{"enum": []any{"a", "b"}}, "maxLength": 2}
		case 8:
			return map[string]any{"oneOf": []any{map[string]any{"type": "integer", "minimum": 0}, map[string]any{"type": "integer", "maximum": 5}}}
		case 9:
			return map[string]any{"type": []any{"string", "null"}}
		case 10:
			return map[string]any{"const": map[string]any{"k": []any{1, "x"}}}
		}
		return map[string]any{"type": "boolean"}
	}
	if depth > 2 || rng.IntN(3) == 0 {
		return leaf()
	}
	switch rng.IntN(7) {
	case 0:
		props := map[string]any{}
		var req []any
		for i := range 1 + rng.IntN(4) {
			k := "p" + strconv.Itoa(i)
			props[k] = richSchema(rng, depth+1)
			if rng.IntN(2) == 0 {
				req = append(req, k)
			}
		}
		o := map[string]any{"type": "object", "properties": props}
		if len(req) > 0 {
			o["required"] = req
		}
		switch rng.IntN(5) {
		case 0:
			o["additionalProperties"] = richSchema(rng, depth+1)
		case 1:
			o["patternProperties"] = map[string]any{"^x_": richSchema(rng, depth+1)}
			o["additionalProperties"] = false
		case 2:
			o["minProperties"] = 1 + rng.IntN(3)
		case 3:
			o["dependentRequired"] = map[string]any{"p0": []any{"p1"}}
		}
		return o
	case 1:
		a := map[string]any{"type": "array", "items": richSchema(rng, depth+1), "maxItems": 1 + rng.IntN(4)}
		if rng.IntN(2) == 0 {
			a["uniqueItems"] = true
		}
		if rng.IntN(3) == 0 {
			a["prefixItems"] = []any{richSchema(rng, depth+1)}
		}
		return a
	case 2:
		return map[string]any{"anyOf": []any{richSchema(rng, depth+1), richSchema(rng, depth+1)}}
	case 3:
		return map[string]any{"allOf": []any{richSchema(rng, depth+1), richSchema(rng, depth+1)}}
	case 4:
		return map[string]any{"type": "object", "properties": map[string]any{"k": map[string]any{"enum": []any{"a", "b"}}, "v": richSchema(rng, depth+1)}, "required": []any{"k"},
			"if": map[string]any{"properties": map[string]any{"k": map[string]any{"const": "a"}}}, "then": map[string]any{"required": []any{"v"}}}
	case 5:
		return map[string]any{"oneOf": []any{richSchema(rng, depth+1), richSchema(rng, depth+1)}}
	}
	return map[string]any{"type": "array", "contains": richSchema(rng, depth+1), "items": richSchema(rng, depth+1)}
}

// TestGrammarRichSchemas: random schemas of the keywords generated
// schemas combine (formats, ranges, lengths, patterns, uniqueItems,
// patternProperties, dependentRequired, if/then, oneOf, not, contains);
// every text generated under one validates, formats asserted.
func TestGrammarRichSchemas(t *testing.T) {
	rng := rand.New(rand.NewPCG(300, 77))
	served := 0
	for range 300 {
		if checkRich(t, rng) {
			served++
		}
	}
	t.Logf("served %d of 300", served)
}

// FuzzRichSchemas is TestGrammarRichSchemas's check of one schema drawn
// from a seed.
func FuzzRichSchemas(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		checkRich(t, rand.New(rand.NewPCG(seed, 77)))
	})
}

// checkRich draws a schema, checks its bounds and texts, and reports
// whether it was served.
func checkRich(t *testing.T, rng *rand.Rand) bool {
	b, _ := json.Marshal(richSchema(rng, 0))
	texts, err := checkBounds(t, string(b), 3, rng)
	if err != nil {
		return false
	}
	v, err := schematest.TryCompileFormats(string(b))
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	for _, text := range texts {
		schematest.Validate(t, v, fmt.Sprintf("a text of %s", b), text)
	}
	return true
}
