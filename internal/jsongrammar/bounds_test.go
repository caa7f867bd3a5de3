package jsongrammar

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/hostile"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
)

// Generous bounds for a loaded 2-core CI machine under -race; the
// figures measured on a quiet one are in docs/structured-output.md.
const (
	compileTimeLimit  = 3 * time.Second
	maskTimeLimit     = 3 * time.Second
	compileAllocLimit = 256 << 20
	maskAllocLimit    = 256 << 20
)

// testVocab is a vocabulary of every byte and pieces of JSON, words and
// UTF-8, as a BPE vocabulary has.
func testVocab() []string {
	var toks []string
	for b := range 256 {
		toks = append(toks, string([]byte{byte(b)}))
	}
	return append(toks, `{"`, `":`, `",`, `"}`, `":"`, `","`, `"]`, `["`, `},{"`, "true", "false", "null",
		"12", "-0.", "e+", "00", "name", "id", `"name":"`, " the", "]}", "é", "日本", "\xe6\x97", "\xa5",
		"aaaa", "aaaaaaaa", strings.Repeat("a", 16), "0000", "\\n", "\\u00", "Z\"", "T12:", "-01-")
}

// measure runs f and returns its time and the bytes it allocated.
func measure(f func()) (time.Duration, uint64) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	f()
	d := time.Since(t0)
	runtime.ReadMemStats(&m1)
	return d, m1.TotalAlloc - m0.TotalAlloc
}

// checkBounds compiles schema under the built-in engine's bounds within
// the time and allocation limits; if it compiles, it generates texts
// token by token, each mask within the limits, never stuck in the
// grammar, and returns them. A text whose every next token a Distinct
// refuses (an item under uniqueItems that can only end as a repeat: the
// engine ends it with finish_reason length) is left out.
func checkBounds(t testing.TB, schema string, texts int, rng *rand.Rand) ([]string, error) {
	t.Helper()
	var g *Grammar
	var err error
	took, alloc := measure(func() { g, err = CompileSchema([]byte(schema), BuiltinBounds()) })
	if took > compileTimeLimit || alloc > compileAllocLimit {
		t.Fatalf("compiling %.200s took %v and %d MB", schema, took, alloc>>20)
	}
	if err != nil {
		return nil, err
	}
	toks := testVocab()
	a := NewAutomaton(g, NewVocab(toks))
	var out []string
texts:
	for range texts {
		s, text := a.Start(), ""
		var dist *Distinct
		if g.NeedsDistinct() {
			dist = &Distinct{}
		}
		for step := 0; !s.Complete(); step++ {
			var m []uint64
			took, alloc := measure(func() { m = a.Mask(s) })
			if took > maskTimeLimit || alloc > maskAllocLimit {
				t.Fatalf("a mask of %.200s after %q took %v and %d MB", schema, text, took, alloc>>20)
			}
			var ok []int
			admitted := false
			for id := range toks {
				if Allowed(m, id) {
					admitted = true
					if dist == nil || !dist.Refuses(a, s, toks[id]) {
						ok = append(ok, id)
					}
				}
			}
			if s.CanEnd() && (len(ok) == 0 || step > 400 || rng.IntN(8) == 0) {
				break
			}
			if len(ok) == 0 && admitted {
				continue texts // cornered: cut
			}
			if len(ok) == 0 {
				t.Fatalf("%.300s: stuck after %q: no token and no end", schema, text)
			}
			if step > 3000 {
				t.Fatalf("%.300s: no end after %q", schema, text)
			}
			id := ok[rng.IntN(len(ok))]
			if step > 200 { // close what is open: the last of these admitted
				for _, c := range []string{"0", `"`, "]", "}", `"]}`} {
					for _, j := range ok {
						if toks[j] == c {
							id = j
						}
					}
				}
			}
			text += toks[id]
			if dist != nil {
				s, _ = dist.Feed(a, s, toks[id])
			} else {
				s = a.Feed(s, toks[id])
			}
		}
		out = append(out, text)
	}
	return out, nil
}

// TestBoundsSharedAlternatives: references to one schema through nested
// anyOf are one parse however many the paths, for the schemas of Issue
// A (ten wide, nine deep: 10^9 paths) and wider, deeper and recursive
// ones; each compiles and masks within the limits, and its texts
// validate.
func TestBoundsSharedAlternatives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	schemas := []string{
		hostile.NestedAnyOf(64, 30, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"string"}}},"required":["a"]}`),
		hostile.NestedAnyOf(60, 40, `{"enum":["x","y",1,null]}`),
		hostile.NestedAnyOf(2, 120, `{"type":"integer"}`),
		// Two alternatives at every level of a recursion: 2^depth paths
		// to the same frames.
		`{"$defs":{"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":3},{"type":"string"}]}},"$ref":"#/$defs/n"}`,
		`{"$defs":{"o":{"anyOf":[{"type":"object","properties":{"k":{"$ref":"#/$defs/o"},"v":{"type":"integer"}}},{"type":"object","properties":{"k":{"$ref":"#/$defs/o"},"w":{"type":"string"}}}]}},"$ref":"#/$defs/o"}`,
	}
	for _, h := range hostile.Schemas() {
		if h.Bound == "" {
			schemas = append(schemas, h.Text)
		}
	}
	for _, schema := range schemas {
		texts, err := checkBounds(t, schema, 5, rng)
		if err != nil {
			t.Fatalf("%.200s: %v", schema, err)
		}
		v := schematest.Compile(t, schema)
		for _, text := range texts {
			schematest.Validate(t, v, "text", text)
		}
	}
}

// TestBoundsStateWidth: a state keeps one parse per distinct frame, so
// alternatives that stay ambiguous level after level do not multiply.
func TestBoundsStateWidth(t *testing.T) {
	schema := `{"$defs":{"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"array","items":{"$ref":"#/$defs/n"},"minItems":0}]}},"$ref":"#/$defs/n"}`
	g, err := CompileSchema([]byte(schema), Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAutomaton(g, nil)
	s := a.Feed(a.Start(), strings.Repeat("[", MaxStackDepth-1))
	if s.Dead() || len(s.tops) > 4 {
		t.Fatalf("after %d brackets: %d parses", MaxStackDepth-1, len(s.tops))
	}
	if !a.Feed(s, strings.Repeat("]", MaxStackDepth-1)).Complete() {
		t.Fatal("the brackets do not close")
	}
}

// TestBoundsRefusedFast: schemas past a bound are refused within the
// limits, naming the bound (or the keyword where it was passed).
func TestBoundsRefusedFast(t *testing.T) {
	cases := []struct{ schema, names string }{
		{`{"type":"string","pattern":"^(a|b)*a(a|b){14}$"}`, "MaxPatternStates"},
		{`{"type":"object","properties":{"p":{"type":"string","pattern":"(x{0,200}){0,200}"}},"required":["p"]}`, "pattern"},
		{`{"type":"string","pattern":"^(x{0,30}y{0,30}){0,30}z$"}`, "MaxPatternStates"},
		{strings.Repeat(`{"type":"array","items":`, 3*MaxSchemaDepth) + "{}" + strings.Repeat("}", 3*MaxSchemaDepth), "nests deeper"},
	}
	for _, h := range hostile.Schemas() {
		if h.Bound != "" {
			cases = append(cases, struct{ schema, names string }{h.Text, h.Bound})
		}
	}
	for _, c := range cases {
		took, alloc := measure(func() {
			_, err := CompileSchema([]byte(c.schema), BuiltinBounds())
			if err == nil || !strings.Contains(err.Error(), c.names) {
				t.Errorf("%.120s: got %v, want an error naming %s", c.schema, err, c.names)
			}
		})
		t.Logf("%.60s: refused after %v and %d MB", c.schema, took, alloc>>20)
		if took > compileTimeLimit || alloc > compileAllocLimit {
			t.Errorf("%.120s: refused after %v and %d MB", c.schema, took, alloc>>20)
		}
	}
}

// wideSchema is an object of n properties, each required and typed.
func wideSchema(n int) string {
	var props, req []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"integer"}`, i))
		req = append(req, fmt.Sprintf(`"p%d"`, i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]}`
}

// TestBoundsLargeSchemas: a 64 KB schema of thousands of properties, all
// required, compiles within the limits (its required names are looked
// up, not compared pair by pair).
func TestBoundsLargeSchemas(t *testing.T) {
	schema := wideSchema(2500)
	for len(schema) > MaxSchemaBytes {
		schema = wideSchema(strings.Count(schema, "integer") * 9 / 10)
	}
	took, alloc := measure(func() {
		if _, err := CompileSchema([]byte(schema), BuiltinBounds()); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d bytes, %d properties: %v, %d MB", len(schema), strings.Count(schema, "integer"), took, alloc>>20)
	if took > compileTimeLimit || alloc > compileAllocLimit {
		t.Errorf("compiled after %v and %d MB", took, alloc>>20)
	}
}

// TestBoundsNesting: a schema whose required values nest deeper than the
// engine's bound on open-ended nesting is generated whole; the bound
// holds for what the schema leaves open.
func TestBoundsNesting(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	inner := `{"type":"string"}`
	for i := range 12 {
		inner = fmt.Sprintf(`{"type":"object","properties":{"l%d":%s,"free":{}},"required":["l%d"],"additionalProperties":false}`, i, inner, i)
	}
	texts, err := checkBounds(t, inner, 10, rng)
	if err != nil {
		t.Fatal(err)
	}
	v := schematest.Compile(t, inner)
	for _, text := range texts {
		schematest.Validate(t, v, "text", text)
		if d := maxNesting(text); d > 12+BuiltinBounds().Depth {
			t.Errorf("%s nests %d deep", text, d)
		}
	}
}

func maxNesting(text string) int {
	d, most, in, esc := 0, 0, false, false
	for _, c := range text {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == '{' || c == '['):
			d++
			most = max(most, d)
		case !in && (c == '}' || c == ']'):
			d--
		}
	}
	return most
}

// TestBoundsSiblings: keywords beside allOf, anyOf or $ref apply with
// them.
func TestBoundsSiblings(t *testing.T) {
	for _, c := range []struct {
		schema   string
		ok, fail []string
	}{
		{`{"$defs":{"Base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},"allOf":[{"$ref":"#/$defs/Base"}],"properties":{"extra":{"type":"string"}},"required":["extra"]}`,
			[]string{`{"id":1,"extra":"x"}`}, []string{`{"id":1}`, `{"extra":"x"}`}},
		{`{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"],"anyOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]}`,
			[]string{`{"kind":"k","a":1}`, `{"kind":"k","b":true}`}, []string{`{"a":1}`, `{"kind":"k"}`}},
		{`{"$defs":{"S":{"type":"string"}},"$ref":"#/$defs/S","pattern":"^a+$"}`,
			[]string{`"aa"`}, []string{`"ab"`}},
		{`{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false},{"properties":{"a":{"enum":[1,2,"x"]}},"required":["a"]}]}`,
			[]string{`{"a":2}`}, []string{`{"a":"x"}`, `{}`}},
	} {
		g, err := CompileSchema([]byte(c.schema), Bounds{})
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		a := NewAutomaton(g, nil)
		for _, ok := range c.ok {
			if !a.Feed(a.Start(), ok).CanEnd() {
				t.Errorf("%s: %s is refused", c.schema, ok)
			}
		}
		for _, bad := range c.fail {
			if a.Feed(a.Start(), bad).CanEnd() {
				t.Errorf("%s: %s is accepted", c.schema, bad)
			}
		}
	}
}

// TestBoundsOneOf: oneOf is served as anyOf where its alternatives are
// provably disjoint, and as each alternative less the others where they
// may overlap: every text matches exactly one.
func TestBoundsOneOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, schema := range []string{
		`{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]}`,
		`{"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"number"}},"required":["kind","x"]},{"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]}`,
		`{"oneOf":[{"enum":["a","b"]},{"enum":["c",1]},{"type":"array","maxItems":2},{"type":"array","minItems":3}]}`,
		`{"oneOf":[{"type":"string","pattern":"^a"},{"type":"string","pattern":"^b"}]}`,
		`{"oneOf":[{"const":"x"},{"type":"string","pattern":"^y"}]}`,
		// Overlapping: each alternative less the others.
		`{"oneOf":[{"type":"string"},{"type":"string","pattern":"^a"}]}`,
		`{"oneOf":[{"const":"ab"},{"type":"string","pattern":"^a"}]}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"oneOf":[{"required":["a"]},{"required":["b"]}]}`,
		`{"oneOf":[{"type":"integer","minimum":0},{"type":"integer","maximum":10}]}`,
		`{"oneOf":[{"type":"string","maxLength":3},{"type":"string","minLength":2}]}`,
	} {
		texts, err := checkBounds(t, schema, 20, rng)
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		v := schematest.Compile(t, schema)
		for _, text := range texts {
			schematest.Validate(t, v, "text", text)
		}
	}
}
