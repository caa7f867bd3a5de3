package jsongrammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
)

// walkText generates a text of the automaton at random: each byte drawn
// from those it admits (ASCII, to read the failures), preferring to close
// values once the text is long.
func walkText(t *testing.T, a *Automaton, rng *rand.Rand) string {
	t.Helper()
	var out []byte
	s := a.Start()
	for range 20000 {
		if s.Complete() || s.CanEnd() && rng.IntN(4) == 0 {
			return string(out)
		}
		var next []byte
		for b := 0x20; b < 0x7f; b++ {
			if !a.Feed(s, string(rune(b))).Dead() {
				next = append(next, byte(b))
			}
		}
		if len(next) == 0 && s.CanEnd() {
			return string(out)
		}
		if len(next) == 0 {
			t.Fatalf("stuck after %q", out)
		}
		b := next[rng.IntN(len(next))]
		if len(out) > 60 {
			for _, c := range []byte(`"]}0`) {
				if bytes.IndexByte(next, c) >= 0 {
					b = c
					break
				}
			}
		}
		out = append(out, b)
		s = a.Feed(s, string(b))
	}
	t.Fatalf("no end after %q", out)
	return ""
}

func TestGrammarSchemaWalksValidate(t *testing.T) {
	schemas := []string{
		`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3}},"required":["name","age"],"additionalProperties":false}`,
		`{"type":"array","items":{"enum":["red","green",1,null,{"a":[1,2]}]},"minItems":2}`,
		`{"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},"required":["kind","side"]}]}`,
		`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		`{"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}(-[0-9]{4})?$"}}}`,
		`{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z_]\\w{2,6}-\\d+$"},"ok":{"type":"boolean"},"n":{"type":["number","null"]}},"required":["id","ok","n"]}`,
		`{"type":"object","additionalProperties":{"type":"integer"}}`,
		`{"type":"string"}`,
		`{"type":"number"}`,
		`{}`,
	}
	for i, src := range schemas {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			g, err := CompileSchema([]byte(src), Bounds{})
			if err != nil {
				t.Fatal(err)
			}
			v := schematest.Compile(t, src)
			a := NewAutomaton(g, nil)
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for range 50 {
				schematest.Validate(t, v, "text", walkText(t, a, rng))
			}
		})
	}
}

func TestGrammarRejects(t *testing.T) {
	g, err := CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x","y"]}},"required":["b"],"additionalProperties":false}`), Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAutomaton(g, nil)
	for _, bad := range []string{`{"a":1}`, `{"a":1.5,"b":"x"}`, `{"b":"z"}`, `{"c":1,"b":"x"}`, `{"b":"x","a":1}`, ` {"b":"x"}`, `[`, `{"b":"x"}}`} {
		s := a.Feed(a.Start(), bad)
		if !s.Dead() && s.CanEnd() {
			t.Errorf("%s is accepted", bad)
		}
	}
	for _, good := range []string{`{"b":"x"}`, `{"a":-12,"b":"y"}`} {
		if s := a.Feed(a.Start(), good); !s.Complete() {
			t.Errorf("%s is not accepted whole", good)
		}
	}
	obj := NewAutomaton(JSONObject(Bounds{}), nil)
	for _, good := range []string{`{}`, `{"a":[1,{"b":null}],"c":"\u00e9\n","d":-0.5e+3}`, "{\"é\":\"日本\"}"} {
		if s := obj.Feed(obj.Start(), good); !s.Complete() {
			t.Errorf("json_object: %s is not accepted whole", good)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{"a":01}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":tru}`, `{a:1}`} {
		if s := obj.Feed(obj.Start(), bad); !s.Dead() && s.CanEnd() {
			t.Errorf("json_object: %s is accepted", bad)
		}
	}
	deep := strings.Repeat("[", MaxStackDepth+1)
	if s := obj.Feed(obj.Start(), `{"a":`+deep); !s.Dead() {
		t.Errorf("nesting past %d is admitted", MaxStackDepth)
	}
}

func TestGrammarSchemaErrorsNameKeyword(t *testing.T) {
	for _, c := range []struct{ schema, keyword string }{
		{`{"$ref":"#/$defs/missing"}`, "$ref"},
		{`{"$ref":"https://example.com/schema.json"}`, "$ref"},
		{`{"type":"string","pattern":"(?=a)b"}`, "pattern"},
		{`{"type":"strin"}`, "type"},
		{`{"type":"object","properties":{"a":{}},"required":"a"}`, "required"},
		{`{"type":"array","contains":{"type":"string"},"maxContains":2}`, "maxContains"},
		{`{"$dynamicRef":"#meta"}`, "$dynamicRef"},
		{`{"not":{"multipleOf":3}}`, "multipleOf"},
		{`{"type":"string","not":{"format":"email"}}`, "format"},
		{`{"oneOf":[{"type":"integer","multipleOf":2},{"type":"integer","multipleOf":3}]}`, "oneOf"},
		{`{"type":"integer","multipleOf":1234567,"maximum":1e12}`, "multipleOf"},
		{`{"type":"string","minLength":"x"}`, "minLength"},
	} {
		_, err := CompileSchema([]byte(c.schema), Bounds{})
		se, ok := err.(*SchemaError)
		if !ok || se.Keyword != c.keyword {
			t.Errorf("%s: got %v, want an error naming %q", c.schema, err, c.keyword)
		}
	}
	if _, err := CompileSchema(bytes.Repeat([]byte(" "), MaxSchemaBytes+1), Bounds{}); err == nil {
		t.Error("an oversized schema compiles")
	}
	deep := strings.Repeat(`{"type":"array","items":`, 2*MaxSchemaDepth+2) + `{}` + strings.Repeat("}", 2*MaxSchemaDepth+2)
	if _, err := CompileSchema([]byte(deep), Bounds{}); err == nil {
		t.Error("an over-deep schema compiles")
	}
	for _, unsat := range []string{
		`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}},"required":["next"]}},"$ref":"#/$defs/n"}`,
		`{"allOf":[{"type":"string"},{"type":"integer"}]}`,
		`{"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false,"allOf":[{"properties":{"b":{}},"additionalProperties":false}]}`,
	} {
		if _, err := CompileSchema([]byte(unsat), Bounds{}); err == nil || !strings.Contains(err.Error(), "admits no value") {
			t.Errorf("%s: got %v, want an error saying it admits no value", unsat, err)
		}
	}
	if _, err := CompileSchema([]byte(`{"type":"object","title":"T","description":"d","properties":{"a":{"type":"string","default":"x"}},"$schema":"http://json-schema.org/draft-07/schema#"}`), Bounds{}); err != nil {
		t.Errorf("annotations: %v", err)
	}
}

// TestGrammarMaskMatchesFeed checks every token mask against feeding each
// token's bytes, over a vocabulary with JSON pieces, words and bytes.
func TestGrammarMaskMatchesFeed(t *testing.T) {
	var toks []string
	for b := 0; b < 256; b++ {
		toks = append(toks, string([]byte{byte(b)}))
	}
	toks = append(toks, "", `{"`, `":`, `",`, `"}`, `":"`, "true", "null", "12", "-0.", "e+", `name`, `"name":"`, ` the`, `]}`, "é", "\xe6\x97", "\xa5")
	g, err := CompileSchema([]byte(`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":["number","boolean"]},"xs":{"type":"array","items":{"type":"integer"}}}}`), Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAutomaton(g, NewVocab(toks))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 30 {
		s := a.Start()
		for !s.Complete() {
			m := a.Mask(s)
			var ok []int
			for id, tok := range toks {
				want := tok != "" && !a.Feed(s, tok).Dead()
				if Allowed(m, id) != want {
					t.Fatalf("state after some text: token %q: mask %v, feed %v", tok, Allowed(m, id), want)
				}
				if want {
					ok = append(ok, id)
				}
			}
			if len(ok) == 0 {
				if !s.CanEnd() {
					t.Fatal("no token and no end")
				}
				break
			}
			s = a.Feed(s, toks[ok[rng.IntN(len(ok))]])
			if rng.IntN(40) == 0 && s.CanEnd() {
				break
			}
		}
	}
	if st := a.Stats(); st.Masks == 0 || st.MaskBytes == 0 || st.States == 0 {
		t.Errorf("stats %+v", st)
	}
}

// randomSchema returns a schema of the kinds the package supports.
func randomSchema(rng *rand.Rand, depth int, defs map[string]any) any {
	k := rng.IntN(11)
	if depth > 3 {
		k = rng.IntN(6)
	}
	switch k {
	case 0:
		return map[string]any{"type": "string"}
	case 1:
		return map[string]any{"type": "integer"}
	case 2:
		return map[string]any{"type": "number"}
	case 3:
		return map[string]any{"type": []any{"boolean", "null"}}
	case 4:
		return map[string]any{"enum": []any{"a", "b c", 3, false, nil}[:1+rng.IntN(5)]}
	case 5:
		return map[string]any{"type": "string", "pattern": []string{`^[a-z]+$`, `^\d{2,4}$`, `^[A-Z][a-z_]*-\w?$`}[rng.IntN(3)]}
	case 6, 7:
		props := map[string]any{}
		var req []any
		for i := range 1 + rng.IntN(4) {
			name := fmt.Sprintf("p%d", i)
			props[name] = randomSchema(rng, depth+1, defs)
			if rng.IntN(2) == 0 {
				req = append(req, name)
			}
		}
		o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(req) > 0 {
			o["required"] = req
		}
		return o
	case 8:
		lo := rng.IntN(3)
		return map[string]any{"type": "array", "items": randomSchema(rng, depth+1, defs), "minItems": lo, "maxItems": lo + rng.IntN(3)}
	case 9:
		return map[string]any{"anyOf": []any{randomSchema(rng, depth+1, defs), randomSchema(rng, depth+1, defs)}}
	default:
		name := fmt.Sprintf("d%d", len(defs))
		defs[name] = nil
		defs[name] = randomSchema(rng, depth+1, defs)
		return map[string]any{"$ref": "#/$defs/" + name}
	}
}

// TestGrammarRandomSchemas: 200 random schemas, texts drawn from each
// automaton, every one validated by a real validator.
func TestGrammarRandomSchemas(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 43))
	for i := range 200 {
		defs := map[string]any{}
		root := randomSchema(rng, 0, defs)
		doc := map[string]any{"anyOf": []any{root}}
		if len(defs) > 0 {
			doc["$defs"] = defs
		}
		src, _ := json.Marshal(doc)
		g, err := CompileSchema(src, Bounds{})
		if err != nil {
			t.Fatalf("schema %d %s: %v", i, src, err)
		}
		v := schematest.Compile(t, string(src))
		a := NewAutomaton(g, nil)
		for range 5 {
			schematest.Validate(t, v, "text", walkText(t, a, rng))
		}
	}
}

// TestGrammarBounded: a bounded grammar ends strings, free arrays and
// free objects at its bounds, and nests no deeper.
func TestGrammarBounded(t *testing.T) {
	a := NewAutomaton(JSONObject(Bounds{String: 4, Items: 2, Depth: 3}), nil)
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{`{"abcd":"wxyz"}`, true}, {`{"abcde":1}`, false}, {`{"a":[1,2]}`, true}, {`{"a":[1,2,3]}`, false},
		{`{"a":1,"b":2}`, true}, {`{"a":1,"b":2,"c":3}`, false}, {`{"a":[[1]]}`, true}, {`{"a":[[[1]]]}`, false},
	} {
		s := a.Feed(a.Start(), c.text)
		if got := s.Complete(); got != c.ok {
			t.Errorf("%s: complete %v, want %v", c.text, got, c.ok)
		}
	}
	g, err := CompileSchema([]byte(`{"type":"object","properties":{"id":{"type":"string","pattern":"^\\w+$"}},"required":["id"]}`), Bounds{String: 3})
	if err != nil {
		t.Fatal(err)
	}
	b := NewAutomaton(g, nil)
	if !b.Feed(b.Start(), `{"id":"abc"}`).Complete() || !b.Feed(b.Start(), `{"id":"abcd`).Dead() {
		t.Error("a pattern's unbounded atom is not bounded by the string bound")
	}
}
