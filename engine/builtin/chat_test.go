package builtin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// summary is an answer, completion or chat, streamed or not, reduced to
// what the two APIs share: per choice its text, finish reason and
// logprobs (in the chat shape), and the usage without extra.
type summary struct {
	texts    []string
	finish   []string
	logprobs []*protocol.ChatLogprobs
	usage    *protocol.Usage
}

// choice returns the summary's choice i, growing it as needed.
func (s *summary) choice(i int) int {
	for len(s.texts) <= i {
		s.texts = append(s.texts, "")
		s.finish = append(s.finish, "")
		s.logprobs = append(s.logprobs, nil)
	}
	return i
}

// addLogprobs appends a piece's logprobs to choice i's.
func (s *summary) addLogprobs(i int, lp *protocol.ChatLogprobs) {
	if lp == nil {
		return
	}
	if s.logprobs[i] == nil {
		s.logprobs[i] = &protocol.ChatLogprobs{Content: []protocol.ChatTokenLogprob{}}
	}
	s.logprobs[i].Content = append(s.logprobs[i].Content, lp.Content...)
}

func (s *summary) setUsage(u *protocol.Usage) {
	if u != nil {
		s.usage = &protocol.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	}
}

// ask posts body to path and summarises the answer, checking every body
// and chunk against MLC's response models.
func ask(t *testing.T, te *testEngine, path string, body map[string]any) summary {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := te.client.Post(te.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", path, resp.StatusCode, readAll(t, resp))
	}
	var s summary
	if body["stream"] != true {
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		s.add(t, path, raw, false)
		return s
	}
	sr := protocol.NewSSEReader(resp.Body, 0)
	for {
		data, err := sr.Next()
		if err == io.EOF {
			return s
		}
		if err != nil {
			t.Fatal(err)
		}
		if !protocol.IsDone(data) {
			s.add(t, path, data, true)
		}
	}
}

// add adds a body or chunk of an answer at path to s.
func (s *summary) add(t *testing.T, path string, raw []byte, chunk bool) {
	t.Helper()
	if path == protocol.PathCompletions {
		var r protocol.CompletionResponse
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Choices {
			i := s.choice(c.Index)
			s.texts[i] += c.Text
			if f := c.Finished(); f != "" {
				s.finish[i] = f
			}
			if c.Logprobs != nil {
				lp := c.Logprobs.Chat()
				s.addLogprobs(i, &lp)
			}
		}
		s.setUsage(r.Usage)
		return
	}
	check := mlcschema.CheckChatResponse
	if chunk {
		check = mlcschema.CheckChatChunk
	}
	if err := check(raw); err != nil {
		t.Fatalf("%s is not what MLC answers: %v", raw, err)
	}
	var r struct {
		Object  string
		Choices []struct {
			Index          int
			Message, Delta *struct {
				Role    string
				Content *string
			}
			FinishReason *string `json:"finish_reason"`
			Logprobs     *protocol.ChatLogprobs
		}
		Usage *protocol.Usage
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if want := map[bool]string{false: protocol.ObjectChatCompletion, true: protocol.ObjectChatCompletionChunk}[chunk]; r.Object != want {
		t.Fatalf("object %q, want %q: %s", r.Object, want, raw)
	}
	for _, c := range r.Choices {
		m := c.Message
		if chunk {
			m = c.Delta
		}
		if m.Role != protocol.RoleAssistant || m.Content == nil {
			t.Fatalf("a message without the assistant's role or content: %s", raw)
		}
		i := s.choice(c.Index)
		s.texts[i] += *m.Content
		if c.FinishReason != nil {
			s.finish[i] = *c.FinishReason
		}
		s.addLogprobs(i, c.Logprobs)
	}
	s.setUsage(r.Usage)
}

// TestChatIsTheRenderedCompletion checks that the engine's chat answer is
// the completion of the rendered conversation, as the router sends it
// (chat.Completion): the same text, finish reasons, usage and logprobs,
// streamed or not, with n, seeds, stop strings and logprobs; for the tiny
// model and for a model directory with an MLC conversation template
// (prefix token ids, stop strings and stop token ids).
func TestChatIsTheRenderedCompletion(t *testing.T) {
	te := newTestEngine(t, "", false)
	msgs := []any{
		map[string]any{"role": "system", "content": "be brief."},
		map[string]any{"role": "user", "content": "tell me about the river"},
	}
	base := ask(t, te, protocol.PathChatCompletions, map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0})
	sameAsCompletion(t, te, chat.Tiny(), []map[string]any{
		{"messages": msgs, "max_tokens": 16, "temperature": 0},
		{"messages": msgs, "max_tokens": 16, "temperature": 0, "stop": midStop(t, base.texts[0])},
		{"messages": msgs, "max_tokens": 12, "temperature": 0.9, "seed": 7, "n": 3},
		{"messages": msgs, "max_tokens": 8, "temperature": 0, "logprobs": true, "top_logprobs": 2},
		{"messages": msgs, "max_tokens": 8, "temperature": 0, "logprobs": true},
		{"messages": msgs, "max_completion_tokens": 5, "temperature": 0},
	})
	if stopped := ask(t, te, protocol.PathChatCompletions, map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0,
		"stop": midStop(t, base.texts[0])}); stopped.finish[0] != protocol.FinishStop || !strings.HasPrefix(base.texts[0], stopped.texts[0]) {
		t.Errorf("a chat with a stop string: %+v, want a prefix of %q that stops", stopped, base.texts[0])
	}

	dir := spmModel(t, convConfig(t, []string{"ab"}, []int{100}))
	conv, err := chat.ForModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameAsCompletion(t, newTestEngineModel(t, dir, "", false), conv, []map[string]any{
		{"messages": msgs, "max_tokens": 24, "temperature": 0},
		{"messages": msgs, "max_tokens": 24, "temperature": 0.7, "seed": 3, "n": 2, "logprobs": true, "top_logprobs": 1},
	})
}

// sameAsCompletion checks that each chat body, streamed and not, gets
// the answer of the completion chat.Completion makes of it with tmpl.
func sameAsCompletion(t *testing.T, te *testEngine, tmpl chat.Template, bodies []map[string]any) {
	t.Helper()
	for _, body := range bodies {
		for _, stream := range []bool{false, true} {
			body := with(body, "stream", stream)
			if stream {
				body["stream_options"] = map[string]any{"include_usage": true}
			}
			raw, _ := json.Marshal(body)
			var creq protocol.ChatCompletionRequest
			if err := json.Unmarshal(raw, &creq); err != nil {
				t.Fatal(err)
			}
			if perr := creq.Validate(); perr != nil {
				t.Fatal(perr)
			}
			req, perr := chat.Completion(tmpl, te.e.tok, &creq)
			if perr != nil {
				t.Fatal(perr)
			}
			var completion map[string]any
			b, _ := json.Marshal(req)
			if err := json.Unmarshal(b, &completion); err != nil {
				t.Fatal(err)
			}
			got := ask(t, te, protocol.PathChatCompletions, body)
			want := ask(t, te, protocol.PathCompletions, completion)
			if !reflect.DeepEqual(got, want) || got.usage == nil || len(got.texts) != req.NOr() {
				t.Errorf("%s:\nchat       %+v\ncompletion %+v", raw, got, want)
			}
		}
	}
}

// TestChatStopsAtTheTemplate checks that a chat ends where the template's
// stop string begins: the model would start the user's next turn.
func TestChatStopsAtTheTemplate(t *testing.T) {
	te := newTestEngine(t, "", false)
	if !reflect.DeepEqual(te.e.tmplStops, chat.Tiny().StopStrings()) {
		t.Fatalf("the engine's template stops %q, want the tiny template's", te.e.tmplStops)
	}
	// The tiny model cannot spell "\nuser:" (a word without its space),
	// so a stop string of the request stands in for the template's.
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	base := ask(t, te, protocol.PathChatCompletions, map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0})
	stop := midStop(t, base.texts[0])
	got := ask(t, te, protocol.PathChatCompletions, map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0, "stop": stop})
	if want := beforeToken(t, base.texts[0], strings.Index(base.texts[0], stop)); got.texts[0] != want || got.finish[0] != protocol.FinishStop {
		t.Errorf("%q %q, want %q stop", got.texts[0], got.finish[0], want)
	}
}

// TestChatRefusals checks the chat requests the engine refuses, and how.
func TestChatRefusals(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=64", false)
	long := strings.Repeat(" the sun", 40)
	for _, c := range []struct {
		body        map[string]any
		param, code string
	}{
		{map[string]any{"messages": []any{}}, "messages", protocol.CodeEmptyArray},
		{map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}}, "messages", ""},
		{map[string]any{"messages": []any{map[string]any{"role": "user", "content": long}}}, "messages", protocol.CodeContextLengthExceeded},
		{map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}},
			"debug_config": map[string]any{"disagg_config": map[string]any{"kind": "prepare_receive"}}}, "debug_config.disagg_config", ""},
	} {
		status, b := post(t, te.client, te.url+protocol.PathChatCompletions, c.body)
		perr := protocol.ParseError(status, b)
		if status != http.StatusBadRequest || perr == nil || perr.Param == nil || *perr.Param != c.param || (c.code != "" && (perr.Code == nil || *perr.Code != c.code)) {
			t.Errorf("%v: %d %s, want a 400 about %s (%s)", c.body, status, b, c.param, c.code)
		}
	}
	rendered, err := chat.Tiny().Render([]chat.Message{{Role: "user", Content: chat.Content{Text: long}}}, chat.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	prompt := len(tiny.New().Encode(rendered))
	status, b := post(t, te.client, te.url+protocol.PathChatCompletions, map[string]any{"messages": []any{map[string]any{"role": "user", "content": long}}})
	wantContextError(t, "a conversation beyond the context", status, b, "messages", prompt, 64)

	dir := newTestEngineModel(t, spmModel(t, ""), "", false)
	status, b = post(t, dir.client, dir.url+protocol.PathChatCompletions, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if perr := protocol.ParseError(status, b); status != http.StatusBadRequest || perr == nil || !strings.Contains(perr.Message, "no chat template") {
		t.Errorf("a model without a chat template: %d %s", status, b)
	}
}

// TestChatEngineMetrics checks a chat's query_engine_metrics special
// request: one chunk, whose usage.extra holds the metrics.
func TestChatEngineMetrics(t *testing.T) {
	te := newTestEngine(t, "", false)
	s := ask(t, te, protocol.PathChatCompletions, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}},
		"stream": true, "stream_options": map[string]any{"include_usage": true},
		"debug_config": map[string]any{"special_request": "query_engine_metrics"}})
	if len(s.texts) != 0 || s.usage == nil {
		t.Fatalf("%+v, want a usage chunk and no choices", s)
	}
	b, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}},
		"stream": true, "stream_options": map[string]any{"include_usage": true}, "debug_config": map[string]any{"special_request": "query_engine_metrics"}})
	resp, err := te.client.Post(te.url+protocol.PathChatCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r := readStream(t, resp.Body)
	resp.Body.Close()
	if !r.rawDone || r.chunks != 1 || extraInt(t, r.usage, "kv_pages_total") == 0 {
		t.Fatalf("%+v", r)
	}
}
