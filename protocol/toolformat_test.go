package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/jsongrammar"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
)

// toolFormatRequest is a chat request with two tools whose schemas both
// define "#/$defs/place", differently, and the choice given.
func toolFormatRequest(t *testing.T, choice string) *ChatCompletionRequest {
	t.Helper()
	var r ChatCompletionRequest
	body := `{"messages":[{"role":"user","content":"hi"}],"tool_choice":` + choice + `,"tools":[
	 {"type":"function","function":{"name":"get_weather","parameters":{"$defs":{"place":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}},
	  "type":"object","properties":{"where":{"$ref":"#/$defs/place"},"unit":{"enum":["c","f"]}},"required":["where","unit"],"additionalProperties":false}}},
	 {"type":"function","function":{"name":"count","parameters":{"definitions":{"place":{"type":"integer"}},"properties":{"n":{"$ref":"#/definitions/place"},"const":{"const":{"$ref":"#/definitions/place"}}},"required":["n"]}}},
	 {"type":"function","function":{"name":"ping"}}]}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if e := r.Validate(); e != nil {
		t.Fatal(e)
	}
	return &r
}

// validates reports whether doc validates against schema, by a real
// validator.
func validates(t *testing.T, schema, doc string) bool {
	t.Helper()
	return schematest.Valid(schematest.Compile(t, schema), doc)
}

// TestToolCallFormat: the schema of a required call admits exactly the
// calls of the tools offered (or of the one named), each with arguments
// of its own schema, the definitions of each tool kept apart.
func TestToolCallFormat(t *testing.T) {
	weather := `{"name":"get_weather","arguments":{"where":{"city":"Paris"},"unit":"c"}}`
	count := `{"name":"count","arguments":{"n":3,"const":{"$ref":"#/definitions/place"}}}`
	ping := `{"name":"ping","arguments":{}}`
	for _, c := range []struct {
		choice string
		ok     []string
		not    []string
	}{
		{`"required"`, []string{weather, count, ping}, []string{
			`{"name":"get_weather","arguments":{"where":{"city":3},"unit":"c"}}`,
			`{"name":"count","arguments":{"n":"x"}}`,
			`{"name":"count","arguments":{"n":3,"const":1}}`,
			`{"name":"nope","arguments":{}}`,
			`{"name":"ping","arguments":{},"extra":1}`,
			`{"name":"ping","arguments":3}`,
			`{"name":"ping","arguments":{"x":1}}`,
			`{"name":"ping"}`,
		}},
		{`{"type":"function","function":{"name":"count"}}`, []string{count}, []string{weather, ping}},
		{`"auto"`, nil, nil},
		{`"none"`, nil, nil},
	} {
		rf, e := toolFormatRequest(t, c.choice).ToolCallFormat("arguments")
		if e != nil {
			t.Fatalf("%s: %v", c.choice, e)
		}
		if !checkCallFormat(t, c.choice, rf, c.ok, c.not) {
			continue
		}
		// The properties keep their order: the grammar writes them so.
		if w, u := strings.Index(*rf.Schema, `"where"`), strings.Index(*rf.Schema, `"unit"`); c.choice == `"required"` && (w < 0 || u < w) {
			t.Errorf("the order of get_weather's properties: %s", *rf.Schema)
		}
	}
	rf, _ := toolFormatRequest(t, `{"type":"function","function":{"name":"ping"}}`).ToolCallFormat("parameters")
	if !validates(t, *rf.Schema, `{"name":"ping","parameters":{}}`) || validates(t, *rf.Schema, ping) {
		t.Errorf("Llama 3's key: %s", *rf.Schema)
	}
}

// checkCallFormat holds the call format of the request whose tool_choice
// is choice to the documents that must (ok) and must not (not) validate
// against its schema; with ok nil, to there being no format. It reports
// whether there was one to check.
func checkCallFormat(t *testing.T, choice string, rf *ResponseFormat, ok, not []string) bool {
	t.Helper()
	if ok == nil {
		if rf != nil {
			t.Errorf("%s: format %s, want none", choice, *rf.Schema)
		}
		return false
	}
	if rf == nil || rf.Type != FormatJSONObject || rf.Schema == nil {
		t.Fatalf("%s: format %+v", choice, rf)
	}
	for _, doc := range ok {
		if !validates(t, *rf.Schema, doc) {
			t.Errorf("%s: %s does not validate against %s", choice, doc, *rf.Schema)
		}
	}
	for _, doc := range not {
		if validates(t, *rf.Schema, doc) {
			t.Errorf("%s: %s validates against %s", choice, doc, *rf.Schema)
		}
	}
	return true
}

// TestToolCallFormatErrors: a tool schema the grammar cannot serve is a
// 400 naming the keyword, as the client's API names the tool's schema.
func TestToolCallFormatErrors(t *testing.T) {
	bad := `{"type":"object","properties":{"when":{"type":"array","contains":{},"maxContains":1}},"required":["when"]}`
	chat := func(choice string) *ChatCompletionRequest {
		var r ChatCompletionRequest
		body := `{"messages":[{"role":"user","content":"hi"}],"tool_choice":` + choice + `,"tools":[{"type":"function","function":{"name":"ok"}},{"type":"function","function":{"name":"f","parameters":` + bad + `}}]}`
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	msgs := func(choice string) *ChatCompletionRequest {
		var r MessagesRequest
		body := `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tool_choice":` + choice + `,"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"ok","input_schema":{"type":"object"}},{"name":"f","input_schema":` + bad + `}]}`
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		creq, e := r.Chat()
		if e != nil {
			t.Fatal(e)
		}
		return creq
	}
	for _, c := range []struct {
		req   *ChatCompletionRequest
		param string
	}{
		{chat(`"required"`), "tools[1].function.parameters.properties.when.maxContains"},
		{chat(`{"type":"function","function":{"name":"f"}}`), "tools[1].function.parameters.properties.when.maxContains"},
		{msgs(`{"type":"any"}`), "tools[2].input_schema.properties.when.maxContains"},
		{msgs(`{"type":"tool","name":"f"}`), "tools[2].input_schema.properties.when.maxContains"},
	} {
		_, e := c.req.ToolCallFormat("arguments")
		if e == nil || e.Param == nil || *e.Param != c.param || e.Status != 400 || !strings.Contains(e.Message, `"maxContains"`) {
			t.Errorf("%s: %+v, want a 400 naming %s", c.req.ToolChoice, e, c.param)
		}
	}
	// Offered, not required: the schema is not the grammar's business.
	if rf, e := chat(`"auto"`).ToolCallFormat("arguments"); rf != nil || e != nil {
		t.Errorf("auto: %v %v", rf, e)
	}
	if rf, e := chat(`{"type":"function","function":{"name":"ok"}}`).ToolCallFormat("arguments"); rf == nil || e != nil {
		t.Errorf("naming the other tool: %v %v", rf, e)
	}
}

// TestToolCallFormatLargeTools: sixty tools of parameters of about
// 64 KB each are a 400 naming tools, fast: their size is checked before
// any of them is compiled.
func TestToolCallFormatLargeTools(t *testing.T) {
	var props []string
	for i := 0; len(strings.Join(props, ",")) < jsongrammar.MaxSchemaBytes-1000; i++ {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string","description":"a property of a large tool"}`, i))
	}
	params := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":["p0"]}`
	var tools []string
	for i := range 60 {
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":"f%d","parameters":%s}}`, i, params))
	}
	var r ChatCompletionRequest
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"hi"}],"tool_choice":"required","tools":[`+strings.Join(tools, ",")+`]}`), &r); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, e := r.ToolCallFormat("arguments")
	took := time.Since(t0)
	if e == nil || e.Param == nil || *e.Param != "tools" || e.Status != 400 {
		t.Fatalf("%+v, want a 400 naming tools", e)
	}
	if took > 2*time.Second {
		t.Errorf("refused after %v", took)
	}
	// One such tool alone is served.
	r.Tools = r.Tools[:1]
	if _, e := r.ToolCallFormat("arguments"); e != nil {
		t.Errorf("one tool of %d bytes: %v", len(params), e)
	}
}
