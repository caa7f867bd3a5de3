package caddymlc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcstack"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// mlcFormatCase is a chat that constrains its answer: route is what the
// router gets, direct the chat in MLC's own form that MLC's server gets
// (its RequestResponseFormat, {"type": "json_object", "schema": <string>}:
// MLC has neither OpenAI's json_schema nor tool_choice "required").
type mlcFormatCase struct {
	name           string
	route, direct  map[string]any
	refused        map[string]any // route's constraint as MLC's server refuses it, or nil
	schema         string         // what the answer validates against ("": any JSON)
	toolCall       bool
	sameTextDirect bool // the prompts agree: the router's text is MLC's
}

// mlcRefusalProbe is the user of the requests the test sends MLC's server
// to see it refuse them (checkAccepted lets their 422 pass).
const mlcRefusalProbe = "mlc-refusal-probe"

// responseFormats proves that the generation config the router's calls
// give MLC's engine carries the response_format MLC's own entrypoint
// builds for the same chat, byte for byte as MLC's Python passes it to the
// engine: each case is asked of MLC's server directly and through the
// router, one at a time, and the stand-in records the response_format of
// each generation that starts, the one MLC compiles its grammar from (in
// disagg, the prep_recv's: MLC's start_generation generates under the
// config of the request it prepared). The backend honours the format, so
// the answers are JSON of the schema, the router's text MLC's own.
func (m *mlcRun) responseFormats(t *testing.T) {
	// A schema as a client writes it in MLC's string, spaces and all: MLC
	// hands the string to its engine as it came.
	spaced := `{ "type": "object", "properties": { "n": { "type": "integer" }, "ok": { "type": "boolean" } }, "required": [ "n", "ok" ], "additionalProperties": false }`
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(structuredPerson)); err != nil {
		t.Fatal(err)
	}
	tools := []map[string]any{{"type": "function", "function": map[string]any{
		"name": "get_weather", "description": "the weather in a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	}}}
	chat := func(kv ...any) map[string]any {
		body := map[string]any{"model": "tiny", "max_tokens": 160, "temperature": 0,
			"messages": []map[string]string{{"role": "user", "content": "the cat sat on"}}}
		for i := 0; i+1 < len(kv); i += 2 {
			body[kv[i].(string)] = kv[i+1]
		}
		return body
	}
	toolRoute := chat("tools", tools, "tool_choice", "required")
	callSchema := m.toolCallSchema(t, toolRoute)
	cases := []mlcFormatCase{
		{name: "json_object", route: chat("response_format", map[string]any{"type": "json_object"}),
			direct: chat("response_format", map[string]any{"type": "json_object"}), sameTextDirect: true},
		{name: "json_object_schema", route: chat("response_format", map[string]any{"type": "json_object", "schema": spaced}),
			direct: chat("response_format", map[string]any{"type": "json_object", "schema": spaced}), schema: spaced, sameTextDirect: true},
		// OpenAI's form: the schema's JSON, compacted, in MLC's string.
		{name: "json_schema", route: chat("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "person", "strict": true, "schema": json.RawMessage(strings.ReplaceAll(structuredPerson, ",", ", "))}}),
			direct:  chat("response_format", map[string]any{"type": "json_object", "schema": compact.String()}),
			refused: chat("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "schema": json.RawMessage(structuredPerson)}}),
			schema:  structuredPerson, sameTextDirect: true},
		// The call's schema as the router builds it, in MLC's string.
		{name: "tool_choice_required", route: toolRoute,
			direct:  chat("response_format", map[string]any{"type": "json_object", "schema": callSchema}),
			refused: toolRoute, schema: callSchema, toolCall: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.refused != nil {
				refused := cloneBody(c.refused)
				refused["user"] = mlcRefusalProbe
				if status, raw := m.postChat(t, m.servers[0].URL, refused); status != http.StatusUnprocessableEntity {
					t.Errorf("MLC's server took %s: %d %s", mustJSON(refused), status, raw)
				}
			}
			want, direct := m.generated(t, m.servers[:1], m.servers[0].URL, c.direct)
			if len(want) != 1 || want[0].Kind != "" {
				t.Fatalf("MLC's server direct: generations %+v, want one", want)
			}
			if c.direct["response_format"] == nil || string(want[0].ResponseFormat) == "null" {
				t.Fatalf("MLC's server direct passed its engine no response_format: %s", want[0].ResponseFormat)
			}
			var rf struct {
				Type   string  `json:"type"`
				Schema *string `json:"schema"`
			}
			if err := json.Unmarshal(want[0].ResponseFormat, &rf); err != nil {
				t.Fatal(err)
			}
			if s, _ := c.direct["response_format"].(map[string]any)["schema"].(string); rf.Type != "json_object" || (rf.Schema == nil) != (s == "") || rf.Schema != nil && *rf.Schema != s {
				t.Fatalf("MLC's server passed its engine %s for the response_format %s", want[0].ResponseFormat, mustJSON(c.direct["response_format"]))
			}
			got, routed := m.generated(t, m.servers, m.router, c.route)
			if len(got) == 0 {
				t.Fatal("no MLC engine started a generation for the router's request")
			}
			for _, g := range got {
				if mode := m.mode; mode == router.ModeDisagg && g.Kind != "start_generation" {
					t.Errorf("disagg: the router's generation started as %q, not by start_generation", g.Kind)
				}
				if !bytes.Equal(g.ResponseFormat, want[0].ResponseFormat) {
					t.Errorf("the router's generation has response_format %s; MLC's entrypoint gives its engine %s", g.ResponseFormat, want[0].ResponseFormat)
				}
			}
			dtext := direct.Choices[0].Message.Content
			t.Logf("response_format %s; MLC's answer %q, the router's %q %+v", want[0].ResponseFormat, dtext, routed.Choices[0].Message.Content, routed.Choices[0].Message.ToolCalls)
			validateJSON(t, "MLC's own answer", dtext, c.schema)
			rmsg := routed.Choices[0].Message
			if c.toolCall {
				if len(rmsg.ToolCalls) != 1 || rmsg.ToolCalls[0].Function.Name != "get_weather" {
					t.Fatalf("the router's answer calls %+v, want get_weather", rmsg.ToolCalls)
				}
				validateJSON(t, "the router's call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, rmsg.ToolCalls[0].Function.Name, rmsg.ToolCalls[0].Function.Arguments), c.schema)
				return
			}
			validateJSON(t, "the router's answer", rmsg.Content, c.schema)
			if c.sameTextDirect && rmsg.Content != dtext {
				t.Errorf("the router answers %q, MLC's server %q", rmsg.Content, dtext)
			}
		})
	}
}

// toolCallSchema returns the schema of the call a chat requires, as the
// router's protocol package builds it.
func (m *mlcRun) toolCallSchema(t *testing.T, body map[string]any) string {
	t.Helper()
	var creq protocol.ChatCompletionRequest
	if err := json.Unmarshal([]byte(mustJSON(body)), &creq); err != nil {
		t.Fatal(err)
	}
	if e := creq.Validate(); e != nil {
		t.Fatal(e)
	}
	rf, e := creq.ToolCallFormat("arguments")
	if e != nil || rf == nil || rf.Schema == nil {
		t.Fatalf("tool call format: %+v %v", rf, e)
	}
	return *rf.Schema
}

// generated sends a chat to base, checks it is answered, and returns the
// generations servers started meanwhile and the answer.
func (m *mlcRun) generated(t *testing.T, servers []*mlcstack.Server, base string, body map[string]any) ([]mlcstack.Generation, *protocol.ChatCompletionResponse) {
	t.Helper()
	marks := make([]int, len(servers))
	for i, s := range servers {
		g, err := s.Generations()
		if err != nil {
			t.Fatal(err)
		}
		marks[i] = len(g)
	}
	status, raw := m.postChat(t, base, body)
	if status != http.StatusOK {
		t.Fatalf("%s: %d %s", base, status, raw)
	}
	var resp protocol.ChatCompletionResponse
	if err := json.Unmarshal(raw, &resp); err != nil || len(resp.Choices) != 1 {
		t.Fatalf("%s: %v %s", base, err, raw)
	}
	var out []mlcstack.Generation
	for i, s := range servers {
		g, err := s.Generations()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g[marks[i]:]...)
	}
	return out, &resp
}

func (m *mlcRun) postChat(t *testing.T, base string, body map[string]any) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+protocol.PathChatCompletions, strings.NewReader(mustJSON(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// validateJSON checks that text is JSON, of schema unless it is "".
func validateJSON(t *testing.T, what, text, schema string) {
	t.Helper()
	schematest.Check(t, what, text, schema)
}
