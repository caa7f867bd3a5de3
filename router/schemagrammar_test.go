package router

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
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
