package caddymlc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// openAIResponses is a client of the official openai SDK's Responses
// API: a response created whole (its output_text is the SDK's
// convenience), the same streamed (its events), and the error of an
// unsupported tool; then a conversation of three turns through
// previous_response_id (the second streamed), the last retrieved, its
// input items listed, another tenant's reads and deletes of it, and its
// own delete, after which it is gone.
const openAIResponses = `
const OpenAI = require("openai");
(async () => {
  const client = (key) => new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: key, maxRetries: 0 });
  const alice = client("alice"), bob = client("bob");
  const params = { model: "tiny", instructions: "You answer in one line.", input: "the cat sat on",
    max_output_tokens: 12, temperature: 0 };
  const whole = await alice.responses.create(params);
  const events = [];
  let streamed = "", final = null;
  for await (const e of await alice.responses.create({ ...params, stream: true })) {
    events.push({ type: e.type, seq: e.sequence_number });
    if (e.type === "response.output_text.delta") streamed += e.delta;
    if (e.type === "response.completed" || e.type === "response.incomplete") final = e.response;
  }
  const status = async (p) => {
    try { await p; return 200; } catch (e) { return { status: e.status, param: e.param, message: e.message }; }
  };
  const refused = await status(alice.responses.create({ ...params, conversation: "conv_1" }));

  const turns = [];
  let prev = undefined;
  for (const [i, input] of ["the cat sat on", "and the dog?", "and the bird?"].entries()) {
    const p = { ...params, input, previous_response_id: prev };
    let r = null;
    if (i === 1) {
      for await (const e of await alice.responses.create({ ...p, stream: true })) {
        if (e.type === "response.completed" || e.type === "response.incomplete") r = e.response;
      }
    } else {
      r = await alice.responses.create(p);
    }
    turns.push(r);
    prev = r.id;
  }
  const retrieved = await alice.responses.retrieve(prev);
  const items = [];
  for await (const item of alice.responses.inputItems.list(prev)) items.push(item);
  const bobs = [await status(bob.responses.retrieve(prev)), await status(bob.responses.del(prev)),
    await status(bob.responses.create({ ...params, previous_response_id: prev }))];
  const stillThere = await status(alice.responses.retrieve(prev));
  await alice.responses.del(prev);
  const gone = await status(alice.responses.retrieve(prev));
  console.log(JSON.stringify({ whole, events, streamed, final, refused, turns, retrieved, items, bobs, stillThere, gone }));
})().catch((e) => { console.error(e); process.exit(1); });
`

// sdkResponse is what the tests read of a response the SDK returned.
type sdkResponse struct {
	ID, Status string
	OutputText string `json:"output_text"`
	Output     []protocol.ResponseMessage
	Usage      protocol.ResponseUsage
	Store      bool
}

// sdkStatus is a call's outcome: 200, or the SDK's error.
type sdkStatus struct {
	Status         int
	Param, Message string
}

func (s *sdkStatus) UnmarshalJSON(b []byte) error {
	if string(b) == "200" {
		s.Status = 200
		return nil
	}
	type plain sdkStatus
	return json.Unmarshal(b, (*plain)(s))
}

// The official openai SDK's responses API works unchanged against the
// site: responses.create whole and streamed, its text the chat
// completion's for the same conversation (greedy), cut by
// max_output_tokens as incomplete, the stream's events OpenAI's numbered
// from 0; a conversation through previous_response_id equals the same
// turns as chat; retrieve, inputItems.list and del work, and the stored
// response is the tenant's own (the tenant is the API key): another's
// reads, deletes and continuations are 404s.
func TestResponsesOpenAISDK(t *testing.T) {
	store := filepath.Join(t.TempDir(), "responses.db")
	s := startSite(t, 2, "\t\t\ttenant {http.request.header.Authorization}\n\t\t\tresponses_store "+store+"\n")
	var got struct {
		Whole, Final, Retrieved sdkResponse
		Turns                   []sdkResponse
		Events                  []struct {
			Type string
			Seq  int
		}
		Streamed         string
		Items            []protocol.ResponseMessage
		Refused          sdkStatus
		Bobs             []sdkStatus
		StillThere, Gone sdkStatus
	}
	mustUnmarshal(t, npmref.NodeScript(t, openAIResponses, "BASE="+s.base), &got)
	chat := []map[string]any{{"role": "system", "content": "You answer in one line."}, {"role": "user", "content": "the cat sat on"}}
	want, usage := greedyChat(t, s.base, 12, chat)
	if w := got.Whole; w.OutputText != want || w.Status != "incomplete" || len(w.Output) != 1 || w.Output[0].Text() != want || !w.Store ||
		w.Usage.InputTokens != usage.PromptTokens || w.Usage.OutputTokens != usage.CompletionTokens {
		t.Errorf("whole: %+v, want %q and %+v", w, want, usage)
	}
	if got.Streamed != want || got.Final.Status != "incomplete" || got.Final.Output[0].Text() != want {
		t.Errorf("streamed %q, final %+v, want %q", got.Streamed, got.Final, want)
	}
	var names []string
	for i, e := range got.Events {
		if e.Seq != i {
			t.Fatalf("event %d (%s): sequence_number %d", i, e.Type, e.Seq)
		}
		if n := len(names); n == 0 || names[n-1] != e.Type || e.Type != "response.output_text.delta" {
			names = append(names, e.Type)
		}
	}
	if w := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"}; !slices.Equal(names, w) {
		t.Errorf("events %v, want %v", names, w)
	}
	if got.Refused.Status != http.StatusBadRequest || got.Refused.Param != "conversation" {
		t.Errorf("conversation: %+v", got.Refused)
	}

	// The conversation: each turn's text is chat's for the turns so far.
	chat = chat[:1]
	for i, input := range []string{"the cat sat on", "and the dog?", "and the bird?"} {
		chat = append(chat, map[string]any{"role": "user", "content": input})
		want, _ := greedyChat(t, s.base, 12, chat)
		if len(got.Turns) != 3 || len(got.Turns[i].Output) != 1 || got.Turns[i].Output[0].Text() != want {
			t.Fatalf("turn %d: %+v, chat %q", i, got.Turns, want)
		}
		chat = append(chat, map[string]any{"role": "assistant", "content": want})
	}
	last := got.Turns[2]
	if r := got.Retrieved; r.ID != last.ID || r.Output[0].Text() != last.Output[0].Text() || r.Usage != last.Usage {
		t.Errorf("retrieved %+v, created %+v", r, last)
	}
	if len(got.Items) != 1 || got.Items[0].Role != "user" || got.Items[0].Text() != "and the bird?" {
		t.Errorf("input items: %+v", got.Items)
	}
	for i, b := range got.Bobs {
		if b.Status != http.StatusNotFound {
			t.Errorf("bob's call %d: %+v", i, b)
		}
	}
	if got.StillThere.Status != http.StatusOK || got.Gone.Status != http.StatusNotFound {
		t.Errorf("after bob's delete: %+v; after alice's: %+v", got.StillThere, got.Gone)
	}
}

// greedyChat is the greedy chat completion of messages: its text and usage.
func greedyChat(t *testing.T, base string, maxTokens int, messages []map[string]any) (string, protocol.Usage) {
	t.Helper()
	var chat protocol.ChatCompletionResponse
	mustUnmarshal(t, post(t, base+protocol.PathChatCompletions, map[string]any{"model": "tiny", "max_tokens": maxTokens, "temperature": 0,
		"messages": messages}, http.StatusOK), &chat)
	return chat.Choices[0].Message.Content, *chat.Usage
}

// The responses_* options parse, a relative store under Caddy's data
// directory; bad values are errors that name the option.
func TestCaddyfileResponses(t *testing.T) {
	var r Handler
	if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`mlc_router {
		model tiny
		mode whole
		endpoint 127.0.0.1:9001
		responses_store conversations.db
		responses_ttl 24h
		responses_max_size 1MiB
	}`)); err != nil {
		t.Fatal(err)
	}
	if r.Responses != (Responses{ResponsesStore: "conversations.db", ResponsesTTL: caddy.Duration(24 * time.Hour), ResponsesMaxSize: 1 << 20}) ||
		r.responsesPath() != filepath.Join(caddy.AppDataDir(), "conversations.db") {
		t.Fatalf("%+v at %s", r.Responses, r.responsesPath())
	}
	if p := (Responses{}).responsesPath(); p != filepath.Join(caddy.AppDataDir(), "mlc", "responses.db") {
		t.Errorf("default store %s", p)
	}
	if p := (Responses{ResponsesStore: "off"}).responsesPath(); p != "" {
		t.Errorf("store off: %s", p)
	}
	for _, bad := range []string{"responses_ttl soon", "responses_ttl -1h", "responses_max_size big", "responses_store a b", "responses_store a\nresponses_store b"} {
		var r Handler
		err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\nendpoint 127.0.0.1:9001\n" + bad + "\n}"))
		if err == nil || !strings.Contains(err.Error(), "responses_") && !strings.Contains(err.Error(), "wrong argument count") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The response store outlives a reload that keeps it: a response stored
// before reads back after (the store is shared, not closed under the new
// config), its TTL updated; a config with responses_store off keeps none.
func TestResponsesStoreAcrossReload(t *testing.T) {
	ports := freePorts(t, 3)
	store := "\t\tresponses_store " + filepath.Join(t.TempDir(), "responses.db") + "\n"
	eps := "\t\tmode whole\n" + endpointLines(ports[1:]...)
	reloadSite(t, ports[0], eps+store)
	t.Cleanup(func() { stopCaddy(t) })
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	var r protocol.Response
	mustUnmarshal(t, post(t, base+protocol.PathResponses, map[string]any{"input": "the cat sat on", "max_output_tokens": 3}, http.StatusOK), &r)

	reloadSite(t, ports[0], eps+store+"\t\tresponses_ttl 1h\n")
	status, raw := httpCall(t, http.MethodGet, base+protocol.PathResponses+"/"+r.ID, "")
	var got protocol.Response
	if status != http.StatusOK || json.Unmarshal(raw, &got) != nil || got.ID != r.ID || got.Output[0].Text() != r.Output[0].Text() {
		t.Fatalf("after the reload: %d %s", status, raw)
	}

	reloadSite(t, ports[0], eps+"\t\tresponses_store off\n")
	var unstored protocol.Response
	mustUnmarshal(t, post(t, base+protocol.PathResponses, map[string]any{"input": "hi", "max_output_tokens": 2}, http.StatusOK), &unstored)
	if status, raw := httpCall(t, http.MethodGet, base+protocol.PathResponses+"/"+r.ID, ""); unstored.Store || status != http.StatusBadRequest {
		t.Fatalf("store off: store %v, GET %d %s", unstored.Store, status, raw)
	}
}
