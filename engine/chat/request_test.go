package chat

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// chatRequest decodes a chat request body.
func chatRequest(t *testing.T, body string) *protocol.ChatCompletionRequest {
	t.Helper()
	var creq protocol.ChatCompletionRequest
	if err := json.Unmarshal([]byte(body), &creq); err != nil {
		t.Fatal(err)
	}
	return &creq
}

// byteEncoder encodes a text as its bytes, so a test can read the prompt.
type byteEncoder struct{}

func (byteEncoder) Encode(s string) []int {
	ids := []int{}
	for i := range len(s) {
		ids = append(ids, int(s[i]))
	}
	return ids
}

// The completion that answers a chat is the rendered, tokenized
// conversation after the template's prefix ids, with the request's stop
// strings and then the template's, and the request's sampling settings.
func TestCompletion(t *testing.T) {
	creq := chatRequest(t, `{"model":"m","messages":[{"role":"system","content":"be brief."},{"role":"user","content":"hi"}],
		"stop":"END","max_tokens":7,"temperature":0,"n":2,"seed":3,"logprobs":true,"top_logprobs":2,"stream":true,"debug_config":{"ignore_eos":true}}`)
	req, perr := Completion(Tiny(), tiny.New(), creq)
	if perr != nil {
		t.Fatal(perr)
	}
	if want := tiny.New().Encode("system: be brief.\nuser: hi\nassistant:"); !slices.Equal(req.Prompt.IDs, want) {
		t.Errorf("prompt %v, want %v", req.Prompt.IDs, want)
	}
	if !slices.Equal(req.Stop, []string{"END", "\nuser:"}) || *req.MaxTokens != 7 || *req.N != 2 || *req.Seed != 3 ||
		*req.Temperature != 0 || *req.Logprobs != 2 || !req.Stream || req.Model != "m" || req.DebugConfig != nil {
		t.Errorf("completion %+v", req)
	}
	if len(creq.Stop) != 1 {
		t.Errorf("the chat request's stop strings changed: %q", creq.Stop)
	}

	conv, err := FromConvTemplate([]byte(llama3Conv))
	if err != nil {
		t.Fatal(err)
	}
	req, perr = Completion(conv, byteEncoder{}, chatRequest(t, `{"messages":[{"role":"user","content":"hi"}]}`))
	if perr != nil {
		t.Fatal(perr)
	}
	if req.Prompt.IDs[0] != 128000 || !strings.HasPrefix(string(toBytes(req.Prompt.IDs[1:])), "<|start_header_id|>system") ||
		!slices.Equal(req.Stop, []string{"<|end_of_text|>", "<|eot_id|>"}) {
		t.Errorf("llama-3: prompt %q, stop %q", toBytes(req.Prompt.IDs), req.Stop)
	}
}

func toBytes(ids []int) []byte {
	b := []byte{}
	for _, id := range ids {
		b = append(b, byte(id))
	}
	return b
}

// A conversation the template cannot express is the client's error,
// about messages.
func TestCompletionRefuses(t *testing.T) {
	for _, body := range []string{
		`{"messages":[{"content":"no role"}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"not json"}}]}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":true}}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`,
	} {
		_, perr := Completion(Tiny(), tiny.New(), chatRequest(t, body))
		if perr == nil || perr.Status != http.StatusBadRequest || perr.Param == nil || *perr.Param != "messages" {
			t.Errorf("%s: %+v, want a 400 about messages", body, perr)
		}
	}
	// tool_choice "none" renders without the tools.
	if _, perr := Completion(Tiny(), tiny.New(), chatRequest(t, `{"messages":[{"role":"user","content":"hi"}],
		"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`)); perr != nil {
		t.Errorf("tool_choice none: %v", perr)
	}
	empty, err := FromJinja("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, perr := Completion(empty, tiny.New(), chatRequest(t, `{"messages":[{"role":"user","content":"hi"}]}`)); perr == nil || perr.Status != http.StatusBadRequest {
		t.Errorf("a conversation of no tokens: %+v", perr)
	}
}

func TestForModel(t *testing.T) {
	if tmpl, err := ForModel("tiny"); err != nil || tmpl != Tiny() {
		t.Errorf("tiny: %v %v", tmpl, err)
	}
	if _, err := ForModel(t.TempDir()); err == nil {
		t.Error("a directory without a template has one")
	}
}
