package mlcstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// python runs script with the stack's interpreter and path, in a model
// directory (the working directory), feeding it input as JSON and
// decoding its JSON output into out.
func python(t *testing.T, st *Stack, script string, input, out any) {
	t.Helper()
	dir := t.TempDir()
	if _, err := WriteModel(dir); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(input)
	cmd := exec.Command(st.Python, "-c", script)
	cmd.Dir = dir
	cmd.Env = st.Env(nil)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.Bytes())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// The stand-in tokenizer is the tiny model's: the same ids for any text,
// the same bytes for any ids.
func TestTokenizerIsTiny(t *testing.T) {
	st := Setup(t)
	texts := []string{"the cat sat on the mat", " the cat", "Hello, World!\n", "x", "naïve café ☕", "ab12 cd", "  two  spaces", "user: hi\nassistant:"}
	tok := tiny.New()
	var idLists [][]int
	for range 50 {
		ids := make([]int, 1+rand.IntN(20))
		for i := range ids {
			ids[i] = rand.IntN(tok.VocabSize())
		}
		idLists = append(idLists, ids)
		if s := tok.Decode(ids); utf8.ValidString(s) {
			texts = append(texts, s) // JSON carries valid UTF-8 only, as MLC's prompts
		}
	}
	var got struct {
		Encoded [][]int `json:"encoded"`
		Decoded [][]int `json:"decoded"`
	}
	python(t, st, `
import json, sys
from mlcstandin.tokenizer import Tokenizer
tok = Tokenizer(".")
data = json.load(sys.stdin)
print(json.dumps({"encoded": [tok.encode(s) for s in data["texts"]],
                  "decoded": [list(tok.decode_bytes(ids)) for ids in data["ids"]]}))
`, map[string]any{"texts": texts, "ids": idLists}, &got)
	for i, s := range texts {
		if want := tok.Encode(s); !slices.Equal(got.Encoded[i], want) {
			t.Errorf("encode %q = %v, want %v", s, got.Encoded[i], want)
		}
	}
	for i, ids := range idLists {
		b := make([]byte, len(got.Decoded[i]))
		for k, v := range got.Decoded[i] {
			b[k] = byte(v)
		}
		if want := tok.Decode(ids); string(b) != want {
			t.Errorf("decode %v = %q, want %q", ids, b, want)
		}
	}
}

// stopReference is MLC's stop-string rule on whole tokens: the text stops
// at the first character where a stop string ends (of the stop strings
// ending there, the earliest start counts); the token in which it starts
// and all after are dropped. It returns the tokens kept and whether a stop
// string was found.
func stopReference(tokens []string, stops []string) ([]int, bool) {
	text := strings.Join(tokens, "")
	for end := 1; end <= len(text); end++ {
		start := -1
		for _, s := range stops {
			if strings.HasSuffix(text[:end], s) && (start < 0 || end-len(s) < start) {
				start = end - len(s)
			}
		}
		if start < 0 {
			continue
		}
		var kept []int
		pos := 0
		for i, tk := range tokens {
			if pos+len(tk) > start {
				break
			}
			kept = append(kept, i)
			pos += len(tk)
		}
		return kept, true
	}
	return nil, false
}

// The stand-in StopStrHandler (streamer.cc's, ported) keeps the tokens the
// rule keeps, tokens fed one at a time, however the stop strings overlap
// tokens and each other.
func TestStopStrHandler(t *testing.T) {
	st := Setup(t)
	type tc struct {
		Tokens []string `json:"tokens"`
		Stops  []string `json:"stops"`
	}
	cases := []tc{
		{[]string{" the", " cat", " sat"}, []string{"at"}},
		{[]string{" the", " cat", " sat"}, []string{" cat s"}},
		{[]string{" the", " cat", " sat"}, []string{"dog"}},
		{[]string{"a", "b", "a", "b", "c"}, []string{"abc", "bab"}},
		{[]string{"aa", "aab", "x"}, []string{"aaab"}},
	}
	for range 300 {
		var c tc
		for range 1 + rand.IntN(8) {
			n := 1 + rand.IntN(3)
			var b strings.Builder
			for range n {
				b.WriteByte("abc"[rand.IntN(3)])
			}
			c.Tokens = append(c.Tokens, b.String())
		}
		for range 1 + rand.IntN(2) {
			n := 1 + rand.IntN(4)
			var b strings.Builder
			for range n {
				b.WriteByte("abc"[rand.IntN(3)])
			}
			c.Stops = append(c.Stops, b.String())
		}
		cases = append(cases, c)
	}
	var got []struct {
		Kept      []int `json:"kept"`
		Triggered bool  `json:"triggered"`
	}
	python(t, st, `
import json, sys
from mlcstandin.tokenizer import StopStrHandler
out = []
for c in json.load(sys.stdin):
    table = [t.encode() for t in c["tokens"]]
    h = StopStrHandler(c["stops"], table)
    kept = []
    for i in range(len(table)):
        kept += h.put(i)
        if h.stop_triggered:
            break
    if not h.stop_triggered:
        kept += h.finish()
    out.append({"kept": kept, "triggered": h.stop_triggered})
print(json.dumps(out))
`, cases, &got)
	for i, c := range cases {
		want, stopped := stopReference(c.Tokens, c.Stops)
		if !stopped {
			want = make([]int, len(c.Tokens))
			for k := range want {
				want[k] = k
			}
		}
		if got[i].Triggered != stopped || !slices.Equal(got[i].Kept, want) && len(got[i].Kept)+len(want) > 0 {
			t.Errorf("tokens %q, stops %q: kept %v (stopped %v), want %v (stopped %v)", c.Tokens, c.Stops, got[i].Kept, got[i].Triggered, want, stopped)
		}
	}
}

// The logprobs strings are MLC's (data.cc GetLogProbJSON): visible ASCII
// of the token, log(max(p, 1e-10f)) with six significant digits, bytes.
func TestLogprobJSON(t *testing.T) {
	st := Setup(t)
	var got []string
	python(t, st, `
import json, sys
from mlcstandin.engine import logprob_json
print(json.dumps([logprob_json(b" cat", -0.5, [(b" cat", -0.5), (b'"q\\', -30.0)]), logprob_json(b"\n", -1e-9, [])]))
`, nil, &got)
	want := []string{
		`{"token": "cat", "logprob": -0.5, "bytes": [32, 99, 97, 116], "top_logprobs": [{"token": "cat", "logprob": -0.5, "bytes": [32, 99, 97, 116]}, {"token": "\"q\\", "logprob": -23.0259, "bytes": [34, 113, 92]}]}`,
		`{"token": "", "logprob": 0, "bytes": [10], "top_logprobs": []}`,
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got  %s\nwant %s", got[i], want[i])
		}
	}
}

func post(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

type completion struct {
	Choices []struct {
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

func complete(t *testing.T, url string, body map[string]any) completion {
	t.Helper()
	code, out := post(t, url+"/v1/completions", body)
	var c completion
	if code != http.StatusOK || json.Unmarshal(out, &c) != nil || len(c.Choices) == 0 {
		t.Fatalf("POST %s/v1/completions %v: %d %s", url, body, code, out)
	}
	return c
}

// An MLC server answers what its backend generates, stop strings applied
// on whole tokens; its microserving calls, with a debug_config, give the
// same text across two servers, and without one they are a 500 (MLC's
// entrypoints write into request.debug_config).
func TestMLCServer(t *testing.T) {
	st := Setup(t)
	ss := st.Start(t, Options{Servers: 2, Disaggregation: true})
	prompt := "the cat sat on the mat and then it went to the big red house near the"
	body := map[string]any{"prompt": prompt, "max_tokens": 24, "temperature": 0}
	backend := complete(t, ss[0].Backend, body).Choices[0]
	mlc := complete(t, ss[0].URL, body).Choices[0]
	if mlc != backend {
		t.Fatalf("MLC answered %+v, its backend %+v", mlc, backend)
	}

	tok := tiny.New()
	ids := tok.Encode(backend.Text)
	var tokens []string
	for _, id := range ids {
		tokens = append(tokens, tok.Token(id))
	}
	word := strings.TrimSpace(tokens[len(tokens)/2])
	stop := word[len(word)/2:]
	kept, _ := stopReference(tokens, []string{stop})
	want := ""
	for _, i := range kept {
		want += tokens[i]
	}
	got := complete(t, ss[0].URL, map[string]any{"prompt": prompt, "max_tokens": 24, "temperature": 0, "stop": stop}).Choices[0]
	if got.Text != want || got.FinishReason != "stop" {
		t.Fatalf("with stop %q: %q (%s), want %q (stop)", stop, got.Text, got.FinishReason, want)
	}

	n := len(tok.Encode(prompt))
	micro := func(server *Server, path string, kv ...any) (int, []byte) {
		b := map[string]any{"prompt": prompt, "max_tokens": 24, "temperature": 0, "user": "u1", "debug_config": map[string]any{}}
		for i := 0; i < len(kv); i += 2 {
			b[kv[i].(string)] = kv[i+1]
		}
		return post(t, server.URL+path, b)
	}
	code, out := micro(ss[1], "/microserving/prep_recv", "end", -1)
	var prep struct {
		KV      string `json:"kv_append_metadata"`
		Matched int    `json:"prefix_matched_length"`
	}
	if code != http.StatusOK || json.Unmarshal(out, &prep) != nil {
		t.Fatalf("prep_recv: %d %s", code, out)
	}
	if code, out := micro(ss[0], "/microserving/remote_send", "begin", prep.Matched, "end", n-1, "kv_addr_info", prep.KV, "recv_rank", 1); code != http.StatusOK || string(out) != "{}" {
		t.Fatalf("remote_send: %d %s", code, out)
	}
	// MLC generates with the prep_recv's max_tokens, not this call's.
	code, out = micro(ss[1], "/microserving/start_generate", "begin", n-1, "max_tokens", 1)
	var gen completion
	if code != http.StatusOK || json.Unmarshal(out, &gen) != nil || len(gen.Choices) != 1 || gen.Choices[0] != backend {
		t.Fatalf("start_generate: %d %s, want %+v", code, out, backend)
	}

	before, err := ss[1].Exchanges()
	if err != nil {
		t.Fatal(err)
	}
	code, out = post(t, ss[1].URL+"/microserving/prep_recv", map[string]any{"prompt": prompt, "end": -1, "user": "u2"})
	// The server records an exchange once its answer is sent: wait for
	// it. The record of the start_generate above may come after before
	// was read, so the new records are searched for the prep_recv.
	var last Exchange
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ex, err := ss[1].Exchanges()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ex[min(len(before), len(ex)):], func(e Exchange) bool {
			return e.Path == "/microserving/prep_recv" && strings.Contains(e.Request, `"u2"`)
		})
		if i >= 0 {
			last = ex[len(before)+i]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the prep_recv without a debug_config was never recorded")
		}
	}
	if code != http.StatusInternalServerError || last.Status != 500 || !strings.Contains(last.Exception, "disagg_config") {
		t.Fatalf("prep_recv without a debug_config: %d %s, recorded %+v", code, out, last)
	}
	for _, s := range ss {
		if err := s.Exited(); err != nil {
			t.Fatal(err)
		}
		// A stream cut at a stop string ends on the backend when it
		// notices its client left.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			l, err := s.BackendLoad()
			if err == nil && l.Idle() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("backend %s: %+v %v", s.Backend, l, err)
			}
		}
	}
}

// A preempted remote_send: MLC's /microserving/remote_send answers 200 {}
// (its entrypoint drops the finish reason), while the same call as a
// completion with debug_config.disagg_config answers finish_reason
// "preempt"; the decode engine's start_generate then decodes on KV no one
// wrote, and says nothing.
func TestPreemptedRemoteSend(t *testing.T) {
	st := Setup(t)
	ss := st.Start(t, Options{Servers: 2, Disaggregation: true, PreemptRemoteSends: 1})
	prompt := "the cat sat on the mat and then it went to the big red house near the"
	n := len(tiny.New().Encode(prompt))
	want := complete(t, ss[0].Backend, map[string]any{"prompt": prompt, "max_tokens": 16, "temperature": 0}).Choices[0]
	for i, viaCompletions := range []bool{false, true} {
		user := fmt.Sprintf("u%d", i)
		body := func(kv ...any) map[string]any {
			b := map[string]any{"prompt": prompt, "max_tokens": 16, "temperature": 0, "user": user, "debug_config": map[string]any{}}
			for k := 0; k < len(kv); k += 2 {
				b[kv[k].(string)] = kv[k+1]
			}
			return b
		}
		code, out := post(t, ss[1].URL+"/microserving/prep_recv", body("end", -1))
		var prep struct {
			KV string `json:"kv_append_metadata"`
		}
		if code != http.StatusOK || json.Unmarshal(out, &prep) != nil {
			t.Fatalf("prep_recv: %d %s", code, out)
		}
		if viaCompletions {
			b := body()
			b["debug_config"] = map[string]any{"disagg_config": map[string]any{
				"kind": "remote_send", "kv_window_begin": 0, "kv_window_end": n - 1, "kv_append_metadata": prep.KV, "dst_group_offset": 1}}
			if c := complete(t, ss[0].URL, b).Choices[0]; c.FinishReason != "preempt" {
				t.Fatalf("remote_send as a completion: %+v, want finish_reason preempt", c)
			}
		} else if code, out := post(t, ss[0].URL+"/microserving/remote_send", body("begin", 0, "end", n-1, "kv_addr_info", prep.KV, "recv_rank", 1)); code != http.StatusOK || string(out) != "{}" {
			t.Fatalf("remote_send: %d %s, want 200 {}", code, out)
		}
		code, out = post(t, ss[1].URL+"/microserving/start_generate", body("begin", n-1))
		var gen completion
		if code != http.StatusOK || json.Unmarshal(out, &gen) != nil || len(gen.Choices) != 1 || gen.Choices[0].Text == want.Text {
			t.Fatalf("start_generate after a preempted remote_send: %d %s; the text with the KV is %q", code, out, want.Text)
		}
	}
	ev, err := ss[1].Events()
	if err != nil || len(ev) != 2 || ev[0].Kind != "decode_on_missing_kv" {
		t.Fatalf("events %+v %v, want two decode_on_missing_kv", ev, err)
	}
}
