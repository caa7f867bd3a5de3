// Package hostile holds the JSON schemas that froze an engine or stalled
// a router before the grammar's compilation and masks were bounded, and
// more of each kind: alternatives nested wide and deep, patterns of many
// bounded repeats, alternatives distributed over many parts, schemas
// whose required values nest deep, keywords beside allOf. The tests and
// the -json bench run them.
package hostile

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Schema is a hostile schema: refused with a 400 naming Bound (a word of
// its message), or served ("" Bound).
type Schema struct {
	Name, Text, Bound string
}

// Schemas are the hostile schemas, the refused first.
func Schemas() []Schema {
	groups := strings.Repeat("a{0,256}", 64)
	return []Schema{
		{"pattern: 64 groups a{0,256}, anchored", `{"type":"object","properties":{"s":{"type":"string","pattern":"^` + groups + `$"}},"required":["s"]}`, "MaxPatternStates"},
		{"pattern: 64 groups a{0,256}", `{"type":"string","pattern":"` + groups + `"}`, "MaxPatternStates"},
		{"pattern: 2^17 states", `{"type":"string","pattern":"^(a|b)*a(a|b){16}$"}`, "MaxPatternStates"},
		{"allOf of 18 anyOf: 2^18 parts", Distributed(18), "Max"},
		{"anyOf of 257 objects", ManyAlternatives(257), "MaxAlternatives"},
		{"anyOf 10 wide, 9 deep", NestedAnyOf(10, 9, `{"type":"string"}`), ""},
		{"anyOf 10 wide, 7 deep", NestedAnyOf(10, 7, `{"type":"string"}`), ""},
		{"anyOf 40 wide, 20 deep", NestedAnyOf(40, 20, `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`), ""},
		{"12 required objects deep", Deep(12), ""},
		{"properties beside allOf", `{"$defs":{"Base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},"allOf":[{"$ref":"#/$defs/Base"}],"properties":{"extra":{"type":"string"}},"required":["extra"]}`, ""},
	}
}

// NestedAnyOf is $defs d0..d(depth-1), each an anyOf of width references
// to the next, the last leaf: width^depth paths to it.
func NestedAnyOf(width, depth int, leaf string) string {
	defs := map[string]any{fmt.Sprintf("d%d", depth): json.RawMessage(leaf)}
	for i := range depth {
		var alts []any
		for range width {
			alts = append(alts, map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)})
		}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"anyOf": alts}
	}
	b, _ := json.Marshal(map[string]any{"$defs": defs, "$ref": "#/$defs/d0"})
	return string(b)
}

// Deep is depth objects, each requiring the next, an integer innermost.
func Deep(depth int) string {
	s := `{"type":"integer"}`
	for i := range depth {
		s = fmt.Sprintf(`{"type":"object","properties":{"k%d":%s,"note":{"type":"string"}},"required":["k%d"],"additionalProperties":false}`, i, s, i)
	}
	return s
}

// Distributed is an allOf of n anyOf of two: 2^n conjunctions.
func Distributed(n int) string {
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf(`{"anyOf":[{"properties":{"a%d":{"type":"integer"}}},{"properties":{"b%d":{"type":"string"}}}]}`, i, i))
	}
	return `{"type":"object","allOf":[` + strings.Join(all, ",") + `]}`
}

// ManyAlternatives is an anyOf of n distinct objects.
func ManyAlternatives(n int) string {
	var alts []string
	for i := range n {
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"a":{"const":%d}},"required":["a"]}`, i))
	}
	return `{"anyOf":[` + strings.Join(alts, ",") + `]}`
}
