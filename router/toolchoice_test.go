package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A request that requires a tool call gets one, whose arguments validate
// against the tool's schema: the built-in engine writes it under the
// JSON grammar the router asks for.

// forcedTools are the tools of the tests, by name: their parameters
// schemas (nested objects, enums, arrays, $defs, none at all).
func forcedTools() map[string]string {
	return map[string]string{
		"get_weather": `{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}`,
		"book_table":  `{"$defs":{"guest":{"type":"object","properties":{"name":{"type":"string","pattern":"^[A-Z][a-z]{1,8}$"},"age":{"type":"integer"}},"required":["name"],"additionalProperties":false}},"type":"object","properties":{"guests":{"type":"array","items":{"$ref":"#/$defs/guest"},"minItems":1,"maxItems":3},"when":{"type":"string","pattern":"^[0-9]{2}:[0-9]{2}$"},"vip":{"type":"boolean"}},"required":["guests","when"],"additionalProperties":false}`,
		"ping":        ``,
	}
}

// forcedPrompts are the prompts the tests ask with.
func forcedPrompts() []string {
	return []string{"what is the weather in Paris?", "the cat sat on", "book a table for two at eight", "tell me a story"}
}

// toolsOf is forcedTools in an API's shape: chat's, the Messages API's
// or the Responses API's.
func toolsOf(t *testing.T, api string) []any {
	var out []any
	for _, name := range []string{"get_weather", "book_table", "ping"} {
		var params any
		if s := forcedTools()[name]; s != "" {
			params = json.RawMessage(s)
		}
		switch api {
		case protocol.PathChatCompletions:
			fn := map[string]any{"name": name, "description": "a tool"}
			if params != nil {
				fn["parameters"] = params
			}
			out = append(out, map[string]any{"type": "function", "function": fn})
		case protocol.PathMessages:
			out = append(out, map[string]any{"name": name, "input_schema": params})
		case protocol.PathResponses:
			out = append(out, map[string]any{"type": "function", "name": name, "parameters": params})
		default:
			t.Fatalf("api %s", api)
		}
	}
	return out
}

// checkCall fails unless a is exactly one call, of a tool of forcedTools
// (of want, when not ""), with arguments that validate against its
// schema by a real validator.
func checkCall(t *testing.T, api, what string, a answer, want string) {
	t.Helper()
	if len(a.calls) != 1 || strings.TrimSpace(a.text) != "" {
		t.Fatalf("%s: text %q, calls %q: want one call and no text", what, a.text, a.calls)
	}
	name, args, _ := strings.Cut(a.calls[0], " ")
	schema, ok := forcedTools()[name]
	if !ok || (want != "" && name != want) {
		t.Fatalf("%s: called %q, want %q", what, name, want)
	}
	if schema == "" {
		// No parameters: chat's tool takes no arguments; the agent
		// APIs' become {"type": "object", "properties": {}}, any object.
		schema = `{"type":"object"}`
		if api == protocol.PathChatCompletions && args != "{}" {
			t.Fatalf("%s: arguments %s of a function without parameters", what, args)
		}
	}
	schematest.Validate(t, schematest.Compile(t, schema), fmt.Sprintf("%s: the arguments of %s", what, name), args)
}

// chatWholeAnswer reads a whole chat answer.
func chatWholeAnswer(t *testing.T, raw []byte) answer {
	var out protocol.ChatCompletionResponse
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("%s: %v", raw, err)
	}
	ch := out.Choices[0]
	a := answer{text: ch.Message.Content, finish: deref(ch.FinishReason)}
	for _, tc := range ch.Message.ToolCalls {
		a.calls = append(a.calls, tc.Function.Name+" "+tc.Function.Arguments)
	}
	return a
}

// TestToolChoiceForced: with tool_choice "required" or a named function
// (chat, Responses) and "any" or "tool" (Messages), every answer is one
// valid call, greedy and sampled, whole and streamed alike.
func TestToolChoiceForced(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	type apiCase struct {
		path   string
		body   func(prompt string) map[string]any
		read   func(*testing.T, []byte) answer
		finish string
	}
	chat := func(choice any) apiCase {
		return apiCase{protocol.PathChatCompletions, func(p string) map[string]any {
			return map[string]any{"messages": []map[string]any{{"role": "user", "content": p}}, "tools": toolsOf(t, protocol.PathChatCompletions),
				"tool_choice": choice, "max_tokens": 400, "stream": true}
		}, chatStreamAnswer, protocol.FinishToolCalls}
	}
	messages := func(choice any) apiCase {
		return apiCase{protocol.PathMessages, func(p string) map[string]any {
			return map[string]any{"messages": []map[string]any{{"role": "user", "content": p}}, "tools": toolsOf(t, protocol.PathMessages),
				"tool_choice": choice, "max_tokens": 400, "stream": true}
		}, messagesStreamAnswer, protocol.StopToolUse}
	}
	responses := func(choice any) apiCase {
		return apiCase{protocol.PathResponses, func(p string) map[string]any {
			return map[string]any{"input": p, "tools": toolsOf(t, protocol.PathResponses), "tool_choice": choice, "max_output_tokens": 400, "stream": true}
		}, responsesStreamAnswer, protocol.ResponseCompleted}
	}
	for _, tc := range []struct {
		api  apiCase
		want string
	}{
		{chat("required"), ""},
		{chat(map[string]any{"type": "function", "function": map[string]any{"name": "book_table"}}), "book_table"},
		{chat(map[string]any{"type": "function", "function": map[string]any{"name": "ping"}}), "ping"},
		{messages(map[string]any{"type": "any"}), ""},
		{messages(map[string]any{"type": "tool", "name": "get_weather"}), "get_weather"},
		{responses("required"), ""},
		{responses(map[string]any{"type": "function", "name": "book_table"}), "book_table"},
	} {
		for i, p := range forcedPrompts() {
			for _, temp := range []float64{0, 0.9} {
				body := tc.api.body(p)
				body["temperature"] = temp
				what := tc.api.path + " " + mustMarshal(t, body["tool_choice"]) + " " + p + " t=" + mustMarshal(t, temp)
				status, raw := callJSON(t, http.MethodPost, c.base+tc.api.path, body)
				if status != http.StatusOK {
					t.Fatalf("%s: %d %s", what, status, raw)
				}
				a := tc.api.read(t, raw)
				checkCall(t, tc.api.path, what, a, tc.want)
				t.Logf("%s: %s", what, a.calls[0])
				if a.finish != tc.api.finish {
					t.Errorf("%s: finish %q, want %q", what, a.finish, tc.api.finish)
				}
				if tc.api.path == protocol.PathChatCompletions && temp == 0 && i%2 == 0 {
					body["stream"] = false
					status, raw := callJSON(t, http.MethodPost, c.base+tc.api.path, body)
					if w := chatWholeAnswer(t, raw); status != http.StatusOK || strings.Join(w.calls, "") != strings.Join(a.calls, "") || w.finish != a.finish {
						t.Errorf("%s: whole %d %+v, streamed %+v", what, status, w, a)
					}
				}
			}
		}
	}
}

// TestToolChoiceAllowed: allowed_tools in mode "required" over some of
// the tools (Responses' and chat's shapes) answers every prompt with one
// valid call of an allowed tool, every tool still offered; the response
// echoes the client's choice.
func TestToolChoiceAllowed(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole}, nil)
	for _, tc := range []struct {
		path    string
		allowed []string
	}{
		{protocol.PathResponses, []string{"get_weather", "ping"}},
		{protocol.PathResponses, []string{"book_table"}},
		{protocol.PathChatCompletions, []string{"book_table", "ping"}},
	} {
		var body map[string]any
		var read func(*testing.T, []byte) answer
		var listed []any
		switch tc.path {
		case protocol.PathResponses:
			for _, n := range tc.allowed {
				listed = append(listed, map[string]any{"type": "function", "name": n})
			}
			listed = append(listed, map[string]any{"type": "web_search"}) // not run: passed over
			body = map[string]any{"tools": toolsOf(t, tc.path), "max_output_tokens": 400, "stream": true,
				"tool_choice": map[string]any{"type": "allowed_tools", "mode": "required", "tools": listed}}
			read = responsesStreamAnswer
		default:
			for _, n := range tc.allowed {
				listed = append(listed, map[string]any{"type": "function", "function": map[string]any{"name": n}})
			}
			body = map[string]any{"tools": toolsOf(t, tc.path), "max_tokens": 400, "stream": true,
				"tool_choice": map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "required", "tools": listed}}}
			read = chatStreamAnswer
		}
		for _, p := range forcedPrompts() {
			for _, temp := range []float64{0, 0.9} {
				if tc.path == protocol.PathResponses {
					body["input"] = p
				} else {
					body["messages"] = []map[string]any{{"role": "user", "content": p}}
				}
				body["temperature"] = temp
				what := tc.path + " " + strings.Join(tc.allowed, ",") + " " + p + " t=" + mustMarshal(t, temp)
				status, raw := callJSON(t, http.MethodPost, c.base+tc.path, body)
				if status != http.StatusOK {
					t.Fatalf("%s: %d %s", what, status, raw)
				}
				a := read(t, raw)
				checkCall(t, tc.path, what, a, "")
				if name, _, _ := strings.Cut(a.calls[0], " "); !slices.Contains(tc.allowed, name) {
					t.Fatalf("%s: called %s, which is not allowed", what, a.calls[0])
				}
				if tc.path == protocol.PathResponses && !strings.Contains(string(raw), `"type":"allowed_tools"`) {
					t.Errorf("%s: the response does not echo the tool choice: %s", what, raw)
				}
			}
		}
	}
}

// TestToolChoiceResumed: a required call is the same in disagg, from
// one engine prefilling in chunks, and from a stream preempted midway
// and resumed from the text delivered.
func TestToolChoiceResumed(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	dec := c.fleet.upstreams[c.r.roles["decode"][0]]
	body := func(p string) map[string]any {
		return map[string]any{"messages": []map[string]any{{"role": "user", "content": p}}, "tools": toolsOf(t, protocol.PathChatCompletions),
			"tool_choice": "required", "max_tokens": 400, "stream": true, "temperature": 0}
	}
	want := make([]answer, len(forcedPrompts()))
	for i, p := range forcedPrompts() {
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, body(p))
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, raw)
		}
		want[i] = chatStreamAnswer(t, raw)
		checkCall(t, protocol.PathChatCompletions, p, want[i], "")
	}
	// One engine, prefilling in chunks of 16 tokens: the same calls.
	chunked := startCoreArgs(t, 1, Config{Mode: ModeWhole}, nil, "--overrides", "prefill_chunk_size=16")
	for i, p := range forcedPrompts() {
		status, raw := callJSON(t, http.MethodPost, chunked.base+protocol.PathChatCompletions, body(p))
		got := chatStreamAnswer(t, raw)
		if status != http.StatusOK || strings.Join(got.calls, "") != strings.Join(want[i].calls, "") || got.finish != want[i].finish {
			t.Errorf("%s whole, chunked: %d %+v, want %+v", p, status, got, want[i])
		}
	}
	proxy := &preemptingProxy{engine: dec.url, parents: map[string][]string{}}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	dec.url = front.URL
	for i, p := range forcedPrompts() {
		proxy.preempted.Store(false) // it preempts the next request once
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, body(p))
		if !proxy.preempted.Load() {
			t.Fatalf("%s: the proxy preempted nothing: the test did not test a resume", p)
		}
		got := chatStreamAnswer(t, raw)
		if status != http.StatusOK || strings.Join(got.calls, "") != strings.Join(want[i].calls, "") || got.finish != want[i].finish {
			t.Errorf("%s resumed: %d %+v, want %+v", p, status, got, want[i])
		}
	}
}

// TestToolChoiceUnsupportedSchema: a required call whose tool's schema
// the grammar cannot serve is a 400 naming the keyword as the client's
// API names it; offered without being required, the tool is served.
func TestToolChoiceUnsupportedSchema(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole}, nil)
	bad := json.RawMessage(`{"type":"object","properties":{"when":{"type":"array","contains":{"type":"string"},"maxContains":1}},"required":["when"]}`)
	msg := []map[string]any{{"role": "user", "content": "when?"}}
	chatTools := []any{weatherTool(), map[string]any{"type": "function", "function": map[string]any{"name": "at", "parameters": bad}}}
	for _, tc := range []struct {
		path  string
		body  map[string]any
		param string
	}{
		{protocol.PathChatCompletions, map[string]any{"messages": msg, "tools": chatTools, "tool_choice": "required", "max_tokens": 20}, "tools[1].function.parameters.properties.when.maxContains"},
		{protocol.PathChatCompletions, map[string]any{"messages": msg, "tools": chatTools, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "at"}}, "max_tokens": 20}, "tools[1].function.parameters.properties.when.maxContains"},
		{protocol.PathMessages, map[string]any{"messages": msg, "tools": []any{map[string]any{"name": "at", "input_schema": bad}}, "tool_choice": map[string]any{"type": "any"}, "max_tokens": 20}, "tools[0].input_schema.properties.when.maxContains"},
		{protocol.PathResponses, map[string]any{"input": "when?", "tools": []any{map[string]any{"type": "function", "name": "at", "parameters": bad}}, "tool_choice": map[string]any{"type": "function", "name": "at"}, "max_output_tokens": 20}, "tools[0].parameters.properties.when.maxContains"},
	} {
		status, raw := callJSON(t, http.MethodPost, c.base+tc.path, tc.body)
		if status != http.StatusBadRequest || !strings.Contains(string(raw), tc.param) || !strings.Contains(string(raw), "maxContains") {
			t.Errorf("%s %v: %d %s, want a 400 naming %s", tc.path, tc.body["tool_choice"], status, raw, tc.param)
		}
	}
	status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, map[string]any{"messages": msg, "tools": chatTools, "max_tokens": 20})
	if status != http.StatusOK {
		t.Errorf("tools offered, auto: %d %s", status, raw)
	}
}

// TestToolChoiceModels: with Qwen3's byte-level BPE vocabulary (151k
// tokens, Hermes-style calls), and with tiny read as Llama 3's JSON calls
// (whose arguments are "parameters"), a required or named call is valid
// too. (Llama 3's template in the reference packages reads no tools.)
func TestToolChoiceModels(t *testing.T) {
	for _, tc := range []struct{ model, parser string }{{"qwen3", ""}, {"tiny", "llama3_json"}} {
		model := tc.model
		t.Run(model+tc.parser, func(t *testing.T) {
			path := "tiny"
			if model != "tiny" {
				path = npmref.ModelDir(t, model)
			}
			c := startCoreModel(t, model, path, 1, Config{Mode: ModeWhole, ToolParser: tc.parser}, nil)
			rec := &bodyRecorder{engine: c.fleet.upstreams[0].url}
			front := httptest.NewServer(rec)
			t.Cleanup(front.Close)
			c.fleet.upstreams[0].url = front.URL
			key := `"arguments"`
			if tc.parser == "llama3_json" {
				key = `"parameters"`
			}
			for _, choice := range []any{"required", map[string]any{"type": "function", "function": map[string]any{"name": "book_table"}}} {
				for _, p := range forcedPrompts()[:2] {
					body := map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": p}}, "tools": toolsOf(t, protocol.PathChatCompletions),
						"tool_choice": choice, "max_tokens": 400, "temperature": 0, "stream": true}
					what := model + " " + mustMarshal(t, choice) + " " + p
					status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, body)
					if status != http.StatusOK {
						t.Fatalf("%s: %d %s", what, status, raw)
					}
					a := chatStreamAnswer(t, raw)
					want := ""
					if choice != "required" {
						want = "book_table"
					}
					checkCall(t, protocol.PathChatCompletions, what, a, want)
					if a.finish != protocol.FinishToolCalls {
						t.Errorf("%s: finish %q", what, a.finish)
					}
					t.Logf("%s: %s", what, a.calls[0])
					// The engine was asked for MLC's response format: the
					// call's schema, its arguments under the syntax's key,
					// in a request MLC's protocol model accepts.
					var sent struct {
						ResponseFormat *protocol.ResponseFormat `json:"response_format"`
					}
					if err := json.Unmarshal([]byte(rec.last(protocol.PathCompletions)), &sent); err != nil || sent.ResponseFormat == nil ||
						sent.ResponseFormat.Type != protocol.FormatJSONObject || sent.ResponseFormat.Schema == nil ||
						!strings.Contains(*sent.ResponseFormat.Schema, `"properties":{"name":{"const":`) || !strings.Contains(*sent.ResponseFormat.Schema, key+":") {
						t.Errorf("%s: the engine got %s, want a json_object format with a call schema whose arguments are %s", what, rec.last(protocol.PathCompletions), key)
					}
					if err := mlcschema.CheckCompletionRequest([]byte(rec.last(protocol.PathCompletions))); err != nil {
						t.Errorf("%s: MLC's CompletionRequest refuses what the engine got: %v", what, err)
					}
				}
			}
		})
	}
}

// bodyRecorder passes requests on to an engine and keeps their bodies.
type bodyRecorder struct {
	engine string
	mu     sync.Mutex
	bodies map[string]string // path -> the last body
}

func (p *bodyRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	if p.bodies == nil {
		p.bodies = map[string]string{}
	}
	p.bodies[r.URL.Path] = string(b)
	p.mu.Unlock()
	u, _ := url.Parse(p.engine)
	r.Body = io.NopCloser(bytes.NewReader(b))
	httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
}

// last is the last body sent to path.
func (p *bodyRecorder) last(path string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bodies[path]
}
