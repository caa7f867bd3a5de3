package caddymlc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// keyLine is a keys file's line for key.
func keyLine(name, key string, models ...string) string {
	sum := sha256.Sum256([]byte(key))
	return mustJSON(apikeys.KeyLine{Name: name, SHA256: hex.EncodeToString(sum[:]), Models: models}) + "\n"
}

// writeKeys writes the keys file's lines.
func writeKeys(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// keysSite starts a router of tiny on one engine that checks the keys
// of the file it returns, holding lines.
func keysSite(t *testing.T, opts string, lines ...string) (*site, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "keys.jsonl")
	writeKeys(t, file, lines...)
	return startSite(t, 1, fmt.Sprintf("\t\t\tmode whole\n\t\t\tkeys %s\n%s", file, opts)), file
}

// bearer is the header of an OpenAI client's key.
func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// sdkAuth is a client of the official openai and Anthropic SDKs: each
// with a good key, then a wrong one, whose error must be the SDK's
// AuthenticationError.
const sdkAuth = `
const OpenAI = require("openai");
const Anthropic = require("@anthropic-ai/sdk");
(async () => {
  const openai = (key) => new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: key, maxRetries: 0 });
  const anthropic = (key) => new Anthropic({ baseURL: process.env.BASE, apiKey: key, maxRetries: 0 });
  const chat = (c) => c.chat.completions.create({ model: "tiny", max_tokens: 3, messages: [{ role: "user", content: "hi" }] });
  const message = (c) => c.messages.create({ model: "tiny", max_tokens: 3, messages: [{ role: "user", content: "hi" }] });
  const fail = async (p, cls) => {
    try { await p; return null; }
    catch (e) { return { auth: e instanceof cls, status: e.status, body: e.error }; }
  };
  const ok = [(await chat(openai(process.env.KEY))).object, (await message(anthropic(process.env.KEY))).type];
  const openaiBad = await fail(chat(openai("sk-wrong")), OpenAI.AuthenticationError);
  const anthropicBad = await fail(message(anthropic("sk-wrong")), Anthropic.AuthenticationError);
  console.log(JSON.stringify({ ok, openaiBad, anthropicBad }));
})().catch((e) => { console.error(e); process.exit(1); });
`

// The official SDKs send their keys as the router reads them (Bearer,
// x-api-key), and raise their AuthenticationError for a wrong one,
// which the router answers in each API's shape.
func TestKeysSDKAuthenticationError(t *testing.T) {
	const key = "sk-mlc-good"
	s, _ := keysSite(t, "", keyLine("team-a", key))
	type failure struct {
		Auth   bool
		Status int
		Body   map[string]any
	}
	var got struct {
		OK                      []string
		OpenAIBad, AnthropicBad *failure
	}
	mustUnmarshal(t, npmref.NodeScript(t, sdkAuth, "BASE="+s.base, "KEY="+key), &got)
	if len(got.OK) != 2 || got.OK[0] != "chat.completion" || got.OK[1] != "message" {
		t.Fatalf("with the key: %v", got.OK)
	}
	if f := got.OpenAIBad; f == nil || !f.Auth || f.Status != 401 || f.Body["type"] != protocol.ErrTypeInvalidRequest || f.Body["code"] != "invalid_api_key" {
		t.Errorf("openai with a wrong key: %+v, want an AuthenticationError, 401 invalid_api_key", f)
	}
	if f := got.AnthropicBad; f == nil || !f.Auth || f.Status != 401 || f.Body["type"] != "error" ||
		f.Body["error"].(map[string]any)["type"] != protocol.AnthropicAuthentication {
		t.Errorf("anthropic with a wrong key: %+v, want an AuthenticationError, 401 authentication_error", f)
	}
	for _, h := range []http.Header{nil, {"Api-Key": {"nope"}}, {"Authorization": {"Basic " + key}}} {
		if status, raw := s.send(protocol.PathCompletions, h, greedy("x", 1)); status != 401 || !strings.Contains(string(raw), "invalid_api_key") {
			t.Errorf("%v: %d %s, want 401 invalid_api_key", h, status, raw)
		}
	}
	if status, raw := s.send(protocol.PathCompletions, http.Header{"Api-Key": {key}}, greedy("x", 1)); status != 200 {
		t.Errorf("api-key: %d %s", status, raw)
	}
}

// An edit of the keys file takes effect within a second, without a
// reload: a key added is accepted, a key edited out is refused; a bad
// line is skipped and the others kept.
func TestKeysFileEditWithinASecond(t *testing.T) {
	s, file := keysSite(t, "", keyLine("a", "sk-a"))
	ok := func(key string) bool {
		status, _ := s.send(protocol.PathCompletions, bearer(key), greedy("x", 1))
		return status == http.StatusOK
	}
	if !ok("sk-a") || ok("sk-b") {
		t.Fatal("sk-a refused or sk-b accepted before the edit")
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		begin := time.Now()
		waitFor(t, what, cond)
		if took := time.Since(begin); took > time.Second {
			t.Errorf("%s took %v, want within 1s", what, took)
		}
	}
	writeKeys(t, file, keyLine("a", "sk-a"), "{not json\n", `{"name":"x","sha256":"sk-plain-key"}`+"\n", keyLine("b", "sk-b"))
	within("sk-b to be accepted", func() bool { return ok("sk-b") })
	if !ok("sk-a") {
		t.Fatal("sk-a refused after bad lines were added")
	}
	writeKeys(t, file, keyLine("b", "sk-b"))
	within("sk-a to be refused", func() bool { return !ok("sk-a") })
	if !ok("sk-b") {
		t.Fatal("sk-b refused")
	}
}

// A key limited to one model sees only it in /v1/models, and a request
// for the other is answered as for a model not served.
func TestKeyModelsLimit(t *testing.T) {
	ports := freePorts(t, 3)
	file := filepath.Join(t.TempDir(), "keys.jsonl")
	writeKeys(t, file, keyLine("one", "sk-one", "alpha"), keyLine("all", "sk-all"))
	loadCaddyfile(t, fmt.Sprintf(`{
	admin off
	auto_https off
}
http://127.0.0.1:%d {
	mlc_router {
		keys %s
		mode whole
		model alpha {
			path tiny
			endpoint 127.0.0.1:%d
		}
		model beta {
			path tiny
			endpoint 127.0.0.1:%d
		}
	}
}
`, ports[0], file, ports[1], ports[2]))
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	for key, want := range map[string]string{"sk-one": `["alpha"]`, "sk-all": `["alpha","beta"]`} {
		_, raw := s.send(protocol.PathModels, bearer(key), nil)
		var list struct{ Data []struct{ ID string } }
		mustUnmarshal(t, raw, &list)
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID)
		}
		if mustJSON(ids) != want {
			t.Errorf("%s: /v1/models %v, want %s", key, ids, want)
		}
	}
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	for model, want := range map[string]int{"alpha": 200, "beta": 404} {
		status, raw := s.send(protocol.PathChatCompletions, bearer("sk-one"), map[string]any{"model": model, "messages": msgs, "max_tokens": 2})
		if status != want || (want == 404 && (!strings.Contains(string(raw), protocol.CodeModelNotFound) || strings.Contains(string(raw), `\"beta\", `))) {
			t.Errorf("%s: %d %s, want %d", model, status, raw, want)
		}
		if status, _ := s.send(protocol.PathModels+"/"+model, bearer("sk-one"), nil); status != want {
			t.Errorf("/v1/models/%s: %d, want %d", model, status, want)
		}
	}
}

// A key's models cover the models a request reaches by their own names:
// a key of the chat model alone reaches no embeddings, by the embedding
// model's name or by the chat model's; a key of the embedding model
// reaches it by either, and no chat.
func TestKeyModelsCoverEmbeddings(t *testing.T) {
	s, _ := keysSite(t, "\t\t\tembedding_model tiny-embed\n",
		keyLine("chat", "sk-chat", "tiny"), keyLine("embed", "sk-embed", "tiny-embed"), keyLine("both", "sk-both", "tiny", "tiny-embed"))
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	for _, c := range []struct {
		key, path, model string
		want             int
	}{
		{"sk-chat", protocol.PathChatCompletions, "tiny", 200},
		{"sk-chat", protocol.PathEmbeddings, "tiny-embed", 404},
		{"sk-chat", protocol.PathEmbeddings, "tiny", 404},
		{"sk-embed", protocol.PathEmbeddings, "tiny-embed", 200},
		{"sk-embed", protocol.PathEmbeddings, "tiny", 200},
		{"sk-embed", protocol.PathChatCompletions, "tiny", 404},
		{"sk-both", protocol.PathEmbeddings, "tiny-embed", 200},
		{"sk-both", protocol.PathChatCompletions, "tiny", 200},
	} {
		body := map[string]any{"model": c.model, "input": "the cat sat", "messages": msgs, "max_tokens": 2}
		status, raw := s.send(c.path, bearer(c.key), body)
		if status != c.want {
			t.Errorf("%s %s %s: %d %s, want %d", c.key, c.path, c.model, status, raw, c.want)
			continue
		}
		if c.want == 404 && (!strings.Contains(string(raw), protocol.CodeModelNotFound) || !strings.Contains(string(raw), `\"`+c.model+`\"`) ||
			strings.Contains(string(raw), `serves \"tiny\", \"tiny-embed\"`)) {
			t.Errorf("%s %s %s: %s, want model_not_found naming the model asked and only the key's", c.key, c.path, c.model, raw)
		}
	}
	if status, _ := s.send(protocol.PathModels+"/tiny-embed", bearer("sk-chat"), nil); status != 404 {
		t.Errorf("/v1/models/tiny-embed with the chat key: %d, want 404", status)
	}
}

// Requests without a key are refused, never counted: past auth_failures
// of them, the address's good key is served. Past auth_failures wrong
// keys from one address, its wrong keys are answered 429 (in each API's
// shape), while its good key is served, as is another address's; the
// failures are counted.
func TestAuthFailuresHoldAddress(t *testing.T) {
	s, _ := keysSite(t, "\t\t\tauth_failures 3\n", keyLine("a", "sk-a"))
	for i := range 5 {
		if status, raw := s.send(protocol.PathCompletions, nil, greedy("x", 1)); status != 401 {
			t.Fatalf("no key %d: %d %s, want 401", i, status, raw)
		}
	}
	if status, raw := s.send(protocol.PathCompletions, bearer("sk-a"), greedy("x", 1)); status != 200 {
		t.Fatalf("the good key after 5 requests without one: %d %s, want 200", status, raw)
	}
	before := metricValue(t, "caddy_mlc_auth_failures_total", "reason", apikeys.Unknown)
	for i, want := range []int{401, 401, 401, 429} {
		if status, raw := s.send(protocol.PathCompletions, bearer("sk-guess"), greedy("x", 1)); status != want {
			t.Fatalf("guess %d: %d %s, want %d", i, status, raw, want)
		}
	}
	message := map[string]any{"model": "tiny", "max_tokens": 1, "messages": []map[string]any{{"role": "user", "content": "x"}}}
	status, raw := s.send(protocol.PathMessages, http.Header{"X-Api-Key": {"sk-guess"}}, message)
	if status != 429 || !strings.Contains(string(raw), protocol.AnthropicRateLimit) {
		t.Fatalf("held address with a wrong key: %d %s, want 429 rate_limit_error", status, raw)
	}
	if d := metricValue(t, "caddy_mlc_auth_failures_total", "reason", apikeys.Unknown) - before; d != 5 {
		t.Errorf("failures counted +%v, want +5", d)
	}
	if status, raw := s.send(protocol.PathMessages, http.Header{"X-Api-Key": {"sk-a"}}, message); status != 200 {
		t.Fatalf("held address with the good key: %d %s, want 200", status, raw)
	}
	if status, raw := s.send(protocol.PathCompletions, nil, greedy("x", 1)); status != 401 {
		t.Fatalf("held address without a key: %d %s, want 401", status, raw)
	}
	other := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	s2 := &site{t: t, base: s.base, client: other}
	if status, raw := s2.send(protocol.PathCompletions, bearer("sk-guess"), greedy("x", 1)); status != 401 {
		t.Fatalf("another address with a wrong key: %d %s, want 401", status, raw)
	}
}

// mlcKey runs `caddy mlc-key` with args and returns what it printed.
func mlcKey(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := &cobra.Command{}
	keyCommand.CobraFunc(cmd)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_, err := runKeyCommand(caddycmd.Flags{FlagSet: cmd.Flags()}, &out)
	return strings.TrimSpace(out.String()), err
}

// `caddy mlc-key new` prints a key that a running router accepts within
// a second, limited to its models; GET /mlc/keys lists it by name and
// hash prefix only; DELETE /mlc/keys/{name} revokes it at once.
func TestKeyCommandAndAdmin(t *testing.T) {
	s, file := keysSite(t, "", "# made by hand\n", keyLine("other", "sk-other"))
	key, err := mlcKey(t, "new", "team-a", "--file", file, "--models", "tiny,none")
	if err != nil || !strings.HasPrefix(key, "sk-mlc-") || len(key) < 40 {
		t.Fatalf("mlc-key new: %q, %v", key, err)
	}
	if _, err := mlcKey(t, "new", "x"); err == nil {
		t.Fatal("mlc-key new without --file succeeded")
	}
	waitFor(t, "the new key to be accepted", func() bool {
		status, _ := s.send(protocol.PathCompletions, bearer(key), greedy("x", 1))
		return status == http.StatusOK
	})
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), key) {
		t.Fatal("the keys file holds the key")
	}
	admin := adminServer(t)
	resp, err := http.Get(admin + "/mlc/keys")
	if err != nil {
		t.Fatal(err)
	}
	var listed []listedKey
	raw := readAll(t, resp)
	mustUnmarshal(t, raw, &listed)
	sum := sha256.Sum256([]byte(key))
	if len(listed) != 2 || listed[1].Name != "team-a" || listed[1].SHA256Prefix != hex.EncodeToString(sum[:4]) || mustJSON(listed[1].Models) != `["tiny","none"]` ||
		strings.Contains(string(raw), hex.EncodeToString(sum[:])) {
		t.Fatalf("GET /mlc/keys: %s", raw)
	}
	if status, body := adminDo(t, http.MethodDelete, admin+"/mlc/keys/team-a"); status != 200 {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	if status, _ := s.send(protocol.PathCompletions, bearer(key), greedy("x", 1)); status != 401 {
		t.Fatalf("a revoked key: %d, want 401", status)
	}
	if status, _ := s.send(protocol.PathCompletions, bearer("sk-other"), greedy("x", 1)); status != 200 {
		t.Fatalf("the other key after the revocation: %d, want 200", status)
	}
	if status, _ := adminDo(t, http.MethodDelete, admin+"/mlc/keys/team-a"); status != 404 {
		t.Fatalf("DELETE of no key: %d, want 404", status)
	}
}

// A key's name is trimmed, by caddy mlc-key new and POST /mlc/keys
// alike, and one that is empty after trimming is refused with a clear
// error, never written as a key no request could use.
func TestKeyNamesTrimmed(t *testing.T) {
	s, file := keysSite(t, "")
	admin := adminServer(t)
	for _, name := range []string{"   ", "\t", "a\nb"} {
		if key, err := mlcKey(t, "new", name, "--file", file); err == nil || key != "" {
			t.Errorf("mlc-key new %q: %q, %v; want an error", name, key, err)
		}
		resp, err := http.Post(admin+"/mlc/keys", "application/json", strings.NewReader(mustJSON(map[string]string{"name": name})))
		if err != nil {
			t.Fatal(err)
		}
		if raw := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "name") {
			t.Errorf("POST /mlc/keys %q: %d %s, want 400 naming the name", name, resp.StatusCode, raw)
		}
	}
	key, err := mlcKey(t, "new", " team-a ", "--file", file)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(admin+"/mlc/keys", "application/json", strings.NewReader(`{"name": " team-b "}`))
	if err != nil {
		t.Fatal(err)
	}
	var made struct{ Name, Key string }
	mustUnmarshal(t, readAll(t, resp), &made)
	if made.Name != "team-b" {
		t.Errorf("POST /mlc/keys answered the name %q, want team-b", made.Name)
	}
	for _, k := range []string{key, made.Key} {
		waitFor(t, "the key to be accepted", func() bool {
			status, _ := s.send(protocol.PathCompletions, bearer(k), greedy("x", 1))
			return status == http.StatusOK
		})
	}
	b, _ := os.ReadFile(file)
	if n := strings.Count(string(b), "\n"); n != 2 || !strings.Contains(string(b), `"name":"team-a"`) || !strings.Contains(string(b), `"name":"team-b"`) {
		t.Errorf("the keys file: %s; want the two trimmed names alone", b)
	}
}

// adminDo makes a request of the admin API and returns the status and body.
func adminDo(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(readAll(t, resp))
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
