package builtin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The scripted replies the tests below answer with.
const (
	weatherCall = `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`
	doneReply   = "It is sunny in Paris. Anything else?"
	defaultText = "I cannot help with that."
)

// repliesFile writes entries as a --replies file and returns its path.
func repliesFile(t testing.TB, entries any) string {
	t.Helper()
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "replies.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentReplies is a script for one tool round trip: a call for the
// weather, the answer once the tool responded.
func agentReplies(t testing.TB) string {
	return repliesFile(t, []reply{
		{Match: "weather", Reply: weatherCall},
		{Match: "<tool_response>", Reply: doneReply},
	})
}

func TestReplyOverlap(t *testing.T) {
	for _, tt := range []struct {
		text, reply string
		want        int
	}{
		{"", "abc", 0},
		{"xyz", "abc", 0},
		{"xya", "abc", 1},
		{"xyab", "abc", 2},
		{"abc", "abc", 3},
		{"zabcabc", "abc", 3},
		{"ab", "abc", 2},
		{"aaab", "aab", 3},
		{"xaa", "aab", 2},
		{"abab", "ababc", 4},
		{"ababa", "ababc", 3},
		{"the end", "d", 1},
	} {
		if got := replyOverlap(tt.text, tt.reply); got != tt.want {
			t.Errorf("replyOverlap(%q, %q) = %d, want %d", tt.text, tt.reply, got, tt.want)
		}
	}
}

// TestChooseReply checks the selection rule on contexts given as text.
func TestChooseReply(t *testing.T) {
	e := &Engine{tok: tiny.New(), replies: []reply{
		{Match: "weather", Reply: weatherCall},
		{Match: "<tool_response>", Reply: doneReply},
		{Match: "weather", Reply: "a later entry with the same match never wins"},
		{Match: "", Reply: defaultText},
	}}
	tok := tiny.New()
	for _, tt := range []struct {
		name, context, want string
	}{
		{"match", "user: what is the weather in Paris?\nassistant:", weatherCall},
		{"latest match wins", "user: weather?\nassistant: " + weatherCall + "\ntool: <tool_response>sunny</tool_response>\nassistant:", doneReply},
		{"latest match wins, either order", "tool: <tool_response>x</tool_response>\nuser: and the weather?\nassistant:", weatherCall},
		{"default", "user: hello\nassistant:", defaultText},
		{"resumed", "user: the weather?\nassistant:" + weatherCall[:17], weatherCall[17:]},
		{"resumed to the end", "user: the weather?\nassistant:" + weatherCall, ""},
	} {
		s := e.chooseReply(tok.Encode(tt.context))
		if s == nil {
			t.Errorf("%s: no reply", tt.name)
			continue
		}
		if got := tok.Decode(s.ids); got != tt.want {
			t.Errorf("%s: script %q, want %q", tt.name, got, tt.want)
		}
	}
	e.replies = e.replies[:3]
	if s := e.chooseReply(tok.Encode("user: hello\nassistant:")); s != nil {
		t.Errorf("no entry matches, yet script %q", tok.Decode(s.ids))
	}
	// The delivered part of a reply is not the prompt: a match there
	// does not count.
	e.replies = []reply{{Match: "sunny", Reply: "sunny days"}, {Match: "", Reply: defaultText}}
	if s := e.chooseReply(tok.Encode("user: hi\nassistant: sunny")); s == nil || tok.Decode(s.ids) != defaultText {
		t.Errorf("match only in the delivered part: %+v", s)
	}
	if s := e.chooseReply(tok.Encode("user: sunny?\nassistant: sunny")); s == nil || tok.Decode(s.ids) != " days" {
		t.Errorf("match in the prompt and the delivered part: %+v", s)
	}
}

func TestRepliesFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "missing.json"), "no such file"},
		{"not JSON", write("bad.json", "match: x"), "JSON array"},
		{"an object", write("object.json", `{"match": "x", "reply": "y"}`), "JSON array"},
		{"unknown field", write("field.json", `[{"match": "x", "text": "y"}]`), "unknown field"},
		{"trailing data", write("trailing.json", `[{"match": "x", "reply": "y"}] []`), "after the JSON array"},
		{"empty", write("empty.json", `[]`), "no entries"},
		{"empty reply", write("emptyreply.json", `[{"match": "x", "reply": "y"}, {"match": "z", "reply": ""}]`), "entry 1 has an empty reply"},
		{"null entry", write("null.json", `[null]`), "entry 0 has an empty reply"},
	} {
		opts, err := ParseArgs([]string{TinyModel, "--replies", tt.path}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewEngine(opts, false, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewEngine error %v, want one naming %s and saying %q", tt.name, err, tt.path, tt.want)
		}
	}
}

// TestRepliesAnswer checks that a scripted reply comes out exactly,
// streamed or not, in one prefill or in chunks, whatever the sampling
// parameters, cut by max_tokens and resumed from delivered text, and
// that an unmatched prompt generates as without --replies.
func TestRepliesAnswer(t *testing.T) {
	file := agentReplies(t)
	whole := newTestEngine(t, "", false, "--replies", file)
	chunked := newTestEngine(t, "prefill_chunk_size=5", false, "--replies", file, "--prefix-cache-mode", "disable")
	plain := newTestEngine(t, "", false)
	prompt := "system: be brief.\nuser: what is the weather in Paris?\nassistant:"
	second := prompt + " " + weatherCall + "\ntool: <tool_response>sunny</tool_response>\nassistant:"
	for _, te := range []*testEngine{whole, chunked} {
		for _, tt := range []struct {
			prompt, want string
		}{{prompt, weatherCall}, {second, doneReply}} {
			for _, req := range []map[string]any{
				greedy(tt.prompt, 200),
				with(greedy(tt.prompt, 200), "stream", true),
				{"prompt": tt.prompt, "max_tokens": 200, "temperature": 1.5, "seed": 7, "logit_bias": map[string]float64{"5": 100}},
				with(greedy(tiny.New().Encode(tt.prompt), 200), "n", 2, "logprobs", 2),
			} {
				got := complete(t, te.client, te.url, protocol.PathCompletions, req)
				for i := range got.texts {
					if got.texts[i] != tt.want || got.finish[i] != protocol.FinishStop {
						t.Fatalf("%v: choice %d: %q (%s), want %q (stop)", req, i, got.texts[i], got.finish[i], tt.want)
					}
				}
				// The script's tokens and the EOS that ends it.
				if n := len(tiny.New().Encode(tt.want)) + 1; got.usage != nil && got.usage.CompletionTokens != n*len(got.texts) {
					t.Errorf("%v: completion_tokens %d, want %d", req, got.usage.CompletionTokens, n*len(got.texts))
				}
			}
		}
	}

	// max_tokens cuts the script; the rest comes when the request is
	// resumed with the delivered text, at every cut.
	ids := tiny.New().Encode(weatherCall)
	for k := 1; k < len(ids); k += 3 {
		cut := complete(t, whole.client, whole.url, protocol.PathCompletions, greedy(prompt, k))
		if want := tiny.New().Decode(ids[:k]); cut.texts[0] != want || cut.finish[0] != protocol.FinishLength {
			t.Fatalf("max_tokens %d: %q (%s), want %q (length)", k, cut.texts[0], cut.finish[0], want)
		}
		rest := complete(t, whole.client, whole.url, protocol.PathCompletions, greedy(tiny.New().Encode(prompt+cut.texts[0]), 200))
		if cut.texts[0]+rest.texts[0] != weatherCall || rest.finish[0] != protocol.FinishStop {
			t.Fatalf("resumed after %d tokens: %q + %q (%s), want %q", k, cut.texts[0], rest.texts[0], rest.finish[0], weatherCall)
		}
	}

	// Stop strings still apply.
	got := complete(t, whole.client, whole.url, protocol.PathCompletions, with(greedy(prompt, 200), "stop", []string{`"city"`}))
	if want := `<tool_call>{"name": "get_weather", "arguments": {`; got.texts[0] != want || got.finish[0] != protocol.FinishStop {
		t.Errorf("stop string: %q (%s), want %q", got.texts[0], got.finish[0], want)
	}

	// No entry matches: the model generates as it does without --replies.
	other := "user: tell me about the river bank.\nassistant:"
	a := complete(t, whole.client, whole.url, protocol.PathCompletions, greedy(other, 12))
	b := complete(t, plain.client, plain.url, protocol.PathCompletions, greedy(other, 12))
	if a.texts[0] != b.texts[0] || a.texts[0] == "" {
		t.Errorf("unmatched prompt: %q, without --replies %q", a.texts[0], b.texts[0])
	}
}

// TestRepliesPreempted runs scripted requests through a small KV pool:
// they are preempted and resumed in the engine, and each still answers
// its script exactly.
func TestRepliesPreempted(t *testing.T) {
	long := strings.Repeat("the answer is here, and it goes on. ", 12)
	file := repliesFile(t, []reply{{Match: "question", Reply: long}})
	te := newTestEngine(t, "max_total_seq_length=384;prefill_chunk_size=64", false, "--replies", file, "--prefix-cache-mode", "disable")
	ps := prompts(16)
	got := make([]result, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			req := greedy(fmt.Sprintf("%s question %d:", clip(p, 40), i), 500)
			got[i] = complete(goTB{t}, te.client, te.url, protocol.PathCompletions, with(req, "stream", i%2 == 0))
		})
	}
	wg.Wait()
	for i := range ps {
		if len(got[i].texts) != 1 || got[i].texts[0] != long || got[i].finish[0] != protocol.FinishStop {
			t.Errorf("request %d: %q %q, want stop %q", i, got[i].finish, got[i].texts, long)
		}
	}
	if m := te.waitMetrics(func(Metrics) bool { return true }); m.Preemptions == 0 {
		t.Errorf("no preemption under pressure: %+v", m)
	}
}

// TestRepliesDisaggregated checks that the decode engine of a
// disaggregated run answers the script of the context it received, at
// every split, as one engine does.
func TestRepliesDisaggregated(t *testing.T) {
	procs := startWorld(t, 2, "--replies", agentReplies(t), "--overrides", "prefill_chunk_size=7")
	c := &http.Client{}
	defer c.CloseIdleConnections()
	r := &router{t: t, client: c, prefill: procs[0].url(""), decode: procs[1].url(""), decodeRank: 1}
	prompt := "system: be brief.\nuser: what is the weather in Paris today, in the old city by the river?\nassistant:"
	whole := complete(t, c, r.prefill, protocol.PathCompletions, greedy(prompt, 200))
	if whole.texts[0] != weatherCall || whole.finish[0] != protocol.FinishStop {
		t.Fatalf("one engine: %q (%s), want %q", whole.texts[0], whole.finish[0], weatherCall)
	}
	for _, f := range []float64{0, 0.3, 0.7} {
		for _, stream := range []bool{false, true} {
			got := r.run(fmt.Sprintf("replies-%v-%v", f, stream), prompt, f, with(greedy(nil, 200), "stream", stream))
			if got.texts[0] != weatherCall || got.finish[0] != protocol.FinishStop {
				t.Fatalf("factor %v stream %v: %q (%s), want %q", f, stream, got.texts[0], got.finish[0], weatherCall)
			}
		}
	}
}

// TestRepliesChat checks the tool round trip of an agent on the tiny
// model: the engine's chat endpoint renders the tools and answers the
// scripted call; the turn after the tool's response, which the chat API
// does not take yet (protocol refuses assistant tool_calls, as MLC
// does), is rendered by the tiny template as the router would render it
// and answered by a completion.
func TestRepliesChat(t *testing.T) {
	te := newTestEngine(t, "", false, "--replies", agentReplies(t))
	tools := []map[string]any{{"type": "function", "function": map[string]any{
		"name": "get_weather", "description": "Get the weather", "parameters": map[string]any{"type": "object"},
	}}}
	msgs := []map[string]any{{"role": "user", "content": "What is the weather in Paris?"}}
	if first := chatText(t, te, map[string]any{"messages": msgs, "tools": tools, "temperature": 0}); first != weatherCall {
		t.Fatalf("first turn: %q, want %q", first, weatherCall)
	}
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
			"id": "c1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`},
		}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": "sunny"})
	body, err := json.Marshal(map[string]any{"messages": msgs, "tools": tools, "temperature": 0})
	if err != nil {
		t.Fatal(err)
	}
	var creq protocol.ChatCompletionRequest
	if err := json.Unmarshal(body, &creq); err != nil {
		t.Fatal(err)
	}
	req, perr := chat.Completion(chat.Tiny(), tiny.New(), &creq)
	if perr != nil {
		t.Fatal(perr)
	}
	if text := tiny.New().Decode(req.Prompt.IDs); !strings.Contains(text, "tool: <tool_response>sunny</tool_response>\nassistant:") {
		t.Fatalf("second turn renders %q", text)
	}
	got := complete(t, te.client, te.url, protocol.PathCompletions, req)
	if got.texts[0] != doneReply || got.finish[0] != protocol.FinishStop {
		t.Fatalf("second turn: %q (%s), want %q", got.texts[0], got.finish[0], doneReply)
	}
}

// chatText runs a whole chat completion and returns its text, checking
// that it stopped.
func chatText(t testing.TB, te *testEngine, req map[string]any) string {
	t.Helper()
	status, body := post(t, te.client, te.url+protocol.PathChatCompletions, req)
	var resp protocol.ChatCompletionResponse
	if status != http.StatusOK || json.Unmarshal(body, &resp) != nil || len(resp.Choices) != 1 {
		t.Fatalf("chat: %d %s", status, body)
	}
	if f := resp.Choices[0].FinishReason; f == nil || *f != protocol.FinishStop {
		t.Fatalf("chat: finish %v, want stop: %s", f, body)
	}
	return resp.Choices[0].Message.Content
}

// TestRepliesQwen3 serves Qwen3's tokenizer directory (151k tokens, its
// Jinja chat template) with a scripted Hermes tool call, answered exactly
// through the engine's chat endpoint with tools and through a completion
// of the token prompt a router renders.
func TestRepliesQwen3(t *testing.T) {
	dir := npmref.ModelDir(t, "qwen3")
	const call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	file := repliesFile(t, []reply{{Match: "Paris", Reply: call}})
	start := time.Now()
	te := newTestEngineModel(t, dir, "", false, "--replies", file)
	t.Logf("engine on %s started in %v", dir, time.Since(start))
	tools := []map[string]any{{"type": "function", "function": map[string]any{
		"name": "get_weather", "description": "Get the weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}}}
	body := map[string]any{"messages": []map[string]any{{"role": "user", "content": "What is the weather in Paris?"}}, "tools": tools, "temperature": 0}
	start = time.Now()
	if got := chatText(t, te, body); got != call {
		t.Fatalf("chat: %q, want %q", got, call)
	}
	t.Logf("chat answered in %v", time.Since(start))

	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var creq protocol.ChatCompletionRequest
	if err := json.Unmarshal(raw, &creq); err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	req, perr := chat.Completion(tmpl, te.e.tok, &creq)
	if perr != nil {
		t.Fatal(perr)
	}
	if text := te.e.tok.Decode(req.Prompt.IDs); !strings.Contains(text, "<tools>") || !strings.HasSuffix(text, "<|im_start|>assistant\n") {
		t.Fatalf("rendered %q", text)
	}
	for _, stream := range []bool{false, true} {
		req.Stream = stream
		got := complete(t, te.client, te.url, protocol.PathCompletions, req)
		if got.texts[0] != call || got.finish[0] != protocol.FinishStop {
			t.Fatalf("completion (stream %v): %q (%s), want %q (stop)", stream, got.texts[0], got.finish[0], call)
		}
		if n := len(te.e.tok.Encode(call)) + 1; got.usage != nil && got.usage.CompletionTokens != n {
			t.Errorf("completion_tokens %d, want %d", got.usage.CompletionTokens, n)
		}
	}
}
