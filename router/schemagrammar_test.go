package router

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// TestSchemaGrammarPerKind: the router checks a schema as the engines
// behind it compile it: in front of built-in engines, by the built-in
// grammar's rules; in front of MLC's, by xgrammar's, which reads
// keywords the built-in grammar refuses and refuses bounds it reads.
func TestSchemaGrammarPerKind(t *testing.T) {
	tok, _ := tokenizer.ForModel("tiny")
	decoderOf := func(kind engine.Kind) *decoder {
		return &decoder{Config: &Config{Model: "tiny", EngineKind: kind}, tok: tok, chatTmpl: chat.Tiny(), toolFormat: "hermes"}
	}
	// MLC's xgrammar ignores maxContains; the built-in grammar refuses
	// it. xgrammar refuses a fractional bound of an integer; the built-in
	// grammar reads it.
	onlyMLC := `{"type":"array","contains":{"type":"string"},"maxContains":2}`
	onlyBuiltin := `{"type":"integer","minimum":1.5}`
	chatBody := func(schema string) string {
		return `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}}`
	}
	completionBody := func(schema string) string {
		b, _ := json.Marshal(map[string]any{"prompt": "hi", "response_format": map[string]any{"type": "json_object", "schema": schema}})
		return string(b)
	}
	messagesBody := func(schema string) string {
		return `{"model":"tiny","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":` + schema + `},"required":["a"]}}],"tool_choice":{"type":"any"}}`
	}
	for _, c := range []struct {
		api     string
		body    func(string) string
		prepare func(d *decoder, hreq *http.Request) *protocol.Error
	}{
		{"chat", chatBody, func(d *decoder, hreq *http.Request) *protocol.Error { _, _, e := d.prepareChat(hreq); return e }},
		{"completion", completionBody, func(d *decoder, hreq *http.Request) *protocol.Error { _, _, e := d.prepareCompletion(hreq); return e }},
		{"messages", messagesBody, func(d *decoder, hreq *http.Request) *protocol.Error { _, _, e := d.prepareMessages(hreq); return e }},
	} {
		for _, k := range []struct {
			kind           engine.Kind
			served, refuse string
			keyword        string
		}{
			{engine.KindBuiltin, onlyBuiltin, onlyMLC, "maxContains"},
			{engine.KindMLC, onlyMLC, onlyBuiltin, "minimum"},
		} {
			d := decoderOf(k.kind)
			hreq, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader(c.body(k.served)))
			if e := c.prepare(d, hreq); e != nil {
				t.Errorf("%s, %s engines: %s refused: %v", c.api, k.kind, k.served, e)
			}
			hreq, _ = http.NewRequest(http.MethodPost, "/", strings.NewReader(c.body(k.refuse)))
			e := c.prepare(d, hreq)
			if e == nil || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, k.keyword) {
				t.Errorf("%s, %s engines: %s: %v, want a 400 naming %s", c.api, k.kind, k.refuse, e, k.keyword)
			}
		}
	}
}

// TestToolKeywordsServed: a tool whose parameters use the keywords
// generated schemas use (formats, numeric ranges, lengths, patterns,
// uniqueItems, patternProperties, if/then) is offered and called, its
// arguments valid, formats asserted.
func TestToolKeywordsServed(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole}, nil)
	params := `{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"who":{"type":"string","format":"email"},"seats":{"type":"integer","minimum":1,"maximum":8},"code":{"type":"string","pattern":"^[A-Z]{3}-\\d{2}$"},"note":{"type":"string","minLength":2,"maxLength":10},"tags":{"type":"array","items":{"enum":["window","aisle","quiet"]},"uniqueItems":true},"extra":{"type":"object","patternProperties":{"^x_":{"type":"boolean"}},"additionalProperties":false},"vip":{"type":"boolean"},"lounge":{"type":"string"}},"required":["when","who","seats","code","note"],"if":{"properties":{"vip":{"const":true}},"required":["vip"]},"then":{"required":["lounge"]}}`
	v := schematest.CompileFormats(t, params)
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "book", "parameters": json.RawMessage(params)}}}
	for i, p := range forcedPrompts() {
		body := map[string]any{"messages": []map[string]any{{"role": "user", "content": p}}, "tools": tools,
			"tool_choice": "required", "max_tokens": 400, "temperature": 0.9, "seed": i}
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, body)
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, raw)
		}
		a := chatWholeAnswer(t, raw)
		if len(a.calls) != 1 {
			t.Fatalf("calls %q, text %q", a.calls, a.text)
		}
		name, args, _ := strings.Cut(a.calls[0], " ")
		if name != "book" {
			t.Fatalf("called %q", name)
		}
		schematest.Validate(t, v, "the arguments", args)
	}
}
