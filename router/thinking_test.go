package router

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// recordedThoughts is a thoughtSink that records what it is given.
type recordedThoughts struct {
	recordedCalls
	thoughts strings.Builder
}

func (r *recordedThoughts) thought(_ int, text string) error {
	r.thoughts.WriteString(text)
	return nil
}

// The thinking sink reads the same reasoning and answer however the text
// is cut, and leaves a text that does not begin with <think> whole.
func TestThinkingSinkAnyCut(t *testing.T) {
	for _, c := range []struct{ text, thoughts, answer string }{
		{"<think>\nadd them\n</think>\n\nIt is 4.", "\nadd them\n", "It is 4."},
		{"\n<think>x</think>y", "x", "y"},
		{"<think>never closed", "never closed", ""},
		{"no <think> here", "", "no <think> here"},
		{"<thin", "", "<thin"},
		{"  ", "", "  "},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			rec := &recordedThoughts{}
			s := newThinkingSink(rec, 1)
			_ = s.delta(0, c.text[:cut], nil)
			_ = s.delta(0, c.text[cut:], nil)
			s.finish(0, protocol.FinishStop)
			if rec.thoughts.String() != c.thoughts || rec.text.String() != c.answer || rec.reason != protocol.FinishStop {
				t.Fatalf("%q cut at %d: thoughts %q, answer %q; want %q, %q", c.text, cut, rec.thoughts.String(), rec.text.String(), c.thoughts, c.answer)
			}
		}
	}
}

// Qwen3's template has a thinking switch: Anthropic's thinking sets it,
// and the model's <think>…</think> comes back as a thinking block, before
// the text and a tool_use block, whole and streamed.
func TestThinkingQwen3(t *testing.T) {
	dir := npmref.ModelDir(t, "qwen3")
	file := filepath.Join(t.TempDir(), "replies.json")
	reply := "<think>\nThe user wants the weather.\n</think>\n\nLet me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	if err := os.WriteFile(file, []byte(`[{"match": "weather", "reply": `+mustMarshal(t, reply)+`}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCoreModel(t, "qwen3", dir, 2, Config{Mode: ModeDisagg}, nil, "--replies", file)
	tool := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}
	body := map[string]any{"model": "qwen3", "max_tokens": 200, "messages": []map[string]any{{"role": "user", "content": "what is the weather in Paris?"}},
		"tools": []any{tool}, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}}
	status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathMessages, body)
	var m protocol.MessagesResponse
	if status != http.StatusOK || json.Unmarshal(raw, &m) != nil || len(m.Content) != 3 {
		t.Fatalf("%d %s", status, raw)
	}
	if b := m.Content; b[0].Type != protocol.BlockThinking || b[0].Thinking != "\nThe user wants the weather.\n" || b[1].Type != protocol.BlockText || b[1].Text != "Let me look." ||
		b[2].Type != protocol.BlockToolUse || b[2].Name != "get_weather" || deref(m.StopReason) != protocol.StopToolUse {
		t.Fatalf("blocks %s", raw)
	}
	body["stream"] = true
	status, raw = callJSON(t, http.MethodPost, c.base+protocol.PathMessages, body)
	var thinking, types []string
	for _, e := range namedEvents(t, raw) {
		var ev struct {
			ContentBlock struct{ Type string } `json:"content_block"`
			Delta        struct{ Type, Thinking string }
		}
		_ = json.Unmarshal(e.data, &ev)
		switch {
		case e.name == protocol.EventContentBlockStart:
			types = append(types, ev.ContentBlock.Type)
		case ev.Delta.Type == "thinking_delta":
			thinking = append(thinking, ev.Delta.Thinking)
		}
	}
	if status != http.StatusOK || strings.Join(types, ",") != "thinking,text,tool_use" || strings.Join(thinking, "") != "\nThe user wants the weather.\n" {
		t.Fatalf("streamed: %d blocks %v, thinking %q\n%s", status, types, thinking, raw)
	}
	// Thinking disabled turns the switch off: the template then writes an
	// empty reasoning itself, and the answer is the reply as text.
	body["stream"], body["thinking"] = false, map[string]any{"type": "disabled"}
	delete(body, "tools")
	status, raw = callJSON(t, http.MethodPost, c.base+protocol.PathMessages, body)
	if status != http.StatusOK || json.Unmarshal(raw, &m) != nil || len(m.Content) != 1 || m.Content[0].Type != protocol.BlockText {
		t.Fatalf("thinking disabled: %d %s", status, raw)
	}
}
