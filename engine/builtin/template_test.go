package builtin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// spmModel writes a model directory: spm-mini's tokenizer.json and, when
// given, mlcChatConfig as its mlc-chat-config.json. It is named spm-mini
// too, since the name seeds the weights.
func spmModel(t *testing.T, mlcChatConfig string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "spm-mini")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "spm-mini", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if mlcChatConfig != "" {
		if err := os.WriteFile(filepath.Join(dir, "mlc-chat-config.json"), []byte(mlcChatConfig), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// convConfig is an mlc-chat-config.json whose conversation template has
// the given stop strings and stop token ids.
func convConfig(t *testing.T, stops []string, stopIDs []int) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"conv_template": map[string]any{
		"name": "test", "roles": map[string]string{"user": "USER", "assistant": "ASSISTANT"}, "seps": []string{"\n"},
		"role_content_sep": ": ", "role_empty_sep": ":", "stop_str": stops, "stop_token_ids": stopIDs,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTemplateStopsEveryRequest checks that the conversation template's
// stop strings and stop token ids end completions too, as MLC adds them
// to every request: a template stop string as the request's own would,
// a template stop token as EOS.
func TestTemplateStopsEveryRequest(t *testing.T) {
	plain := newTestEngineModel(t, spmModel(t, ""), "", false)
	req := greedy("hello world", 24)
	base := complete(t, plain.client, plain.url, protocol.PathCompletions, req).texts[0]
	stop := asciiPair(t, base[2:]) // the model makes many byte tokens, which decode to U+FFFD
	own := complete(t, plain.client, plain.url, protocol.PathCompletions, with(req, "stop", stop))
	if own.finish[0] != protocol.FinishStop || strings.Contains(own.texts[0], stop) {
		t.Fatalf("stop %q: %q %v", stop, own.texts[0], own.finish)
	}
	const stopID = 100 // an ordinary token
	bias := map[string]any{fmt.Sprint(stopID): 100}
	if r := complete(t, plain.client, plain.url, protocol.PathCompletions, with(greedy("hello world", 1), "logit_bias", bias)); r.finish[0] != protocol.FinishLength || r.texts[0] == "" {
		t.Fatalf("token %d without the template: %q %v", stopID, r.texts[0], r.finish)
	}

	tmpl := newTestEngineModel(t, spmModel(t, convConfig(t, []string{stop}, []int{stopID})), "", false)
	got := complete(t, tmpl.client, tmpl.url, protocol.PathCompletions, req)
	if got.texts[0] != own.texts[0] || got.finish[0] != protocol.FinishStop {
		t.Errorf("template stop %q: %q %v, want %q as the request's own stop gives", stop, got.texts[0], got.finish, own.texts[0])
	}
	r := complete(t, tmpl.client, tmpl.url, protocol.PathCompletions, with(greedy("hello world", 1), "logit_bias", bias))
	if r.finish[0] != protocol.FinishStop || r.texts[0] != "" || r.usage.CompletionTokens != 1 {
		t.Errorf("template stop token %d: %q %v %+v, want it to end the text as EOS does", stopID, r.texts[0], r.finish, r.usage)
	}
}

// TestIgnoreEOSIgnoresStopStrings checks that debug_config.ignore_eos
// turns stop strings off as well, as MLC's engine does.
func TestIgnoreEOSIgnoresStopStrings(t *testing.T) {
	te := newTestEngine(t, "", false)
	req := greedy("a story about the sea", 20)
	base := complete(t, te.client, te.url, protocol.PathCompletions, req).texts[0]
	stop := midStop(t, base)
	if r := complete(t, te.client, te.url, protocol.PathCompletions, with(req, "stop", stop)); r.finish[0] != protocol.FinishStop {
		t.Fatalf("stop %q did not stop %q", stop, base)
	}
	r := complete(t, te.client, te.url, protocol.PathCompletions, with(req, "stop", stop, "debug_config", map[string]any{"ignore_eos": true}))
	if r.texts[0] != base || r.finish[0] != protocol.FinishLength {
		t.Errorf("ignore_eos with stop %q: %q %v, want %q to its length", stop, r.texts[0], r.finish, base)
	}
}

// asciiPair returns the first two ASCII letters or digits in a row in s.
func asciiPair(t *testing.T, s string) string {
	t.Helper()
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i+1 < len(s); i++ {
		if alnum(s[i]) && alnum(s[i+1]) {
			return s[i : i+2]
		}
	}
	t.Fatalf("no two ASCII letters in a row in %q", s)
	return ""
}

// A request's stop strings come first, then the template's it lacks; with
// ignore_eos there are none.
func TestRequestStops(t *testing.T) {
	te := newTestEngine(t, "", false)
	s := &server{e: te.e}
	for _, c := range []struct {
		req       []string
		ignoreEOS bool
		want      []string
	}{
		{nil, false, []string{"\nuser:"}},
		{[]string{"x"}, false, []string{"x", "\nuser:"}},
		{[]string{"x", "\nuser:"}, false, []string{"x", "\nuser:"}},
		{[]string{"x"}, true, nil},
	} {
		if got := s.stops(c.req, c.ignoreEOS); !slices.Equal(got, c.want) {
			t.Errorf("stops(%q, %v) = %q, want %q", c.req, c.ignoreEOS, got, c.want)
		}
	}
}
