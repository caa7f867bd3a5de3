package router

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The router turns a chat into the completion chat.Completion makes of
// it, the conversion the built-in engine serves chats with.
func TestPrepareChatIsChatCompletion(t *testing.T) {
	tok, _ := tokenizer.ForModel("tiny")
	r := &decoder{Config: &Config{Model: "tiny"}, tok: tok, chatTmpl: chat.Tiny()}
	body := `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"stop":"x","max_tokens":3,"n":2,"logprobs":true,"top_logprobs":1}`
	hreq, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
	got, prompt, perr := r.prepareChat(hreq)
	if perr != nil {
		t.Fatal(perr)
	}
	var creq protocol.ChatCompletionRequest
	if err := json.Unmarshal([]byte(body), &creq); err != nil {
		t.Fatal(err)
	}
	if perr := creq.Validate(); perr != nil {
		t.Fatal(perr)
	}
	want, perr := chat.Completion(chat.Tiny(), tok, &creq)
	if perr != nil {
		t.Fatal(perr)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) || !slices.Equal(prompt, want.Prompt.IDs) {
		t.Errorf("router %s\nchat.Completion %s", g, w)
	}
}
