package caddymlc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// threeModels is a Caddyfile of one mlc_router serving three models: tiny
// in disagg (%[2]d, %[3]d), a tokenizer.json model (%[4]s) in whole mode
// (%[5]d, %[6]d, with extra engine args %[7]s) and an embedding model
// (%[8]d). %[1]d is the API's port.
const threeModels = `{
	admin off
	auto_https off
	skip_install_trust
}
http://127.0.0.1:%[1]d {
	mlc_router {
		health_uri /healthz
		queue_timeout 20s
		model tiny {
			mode disagg
			endpoint 127.0.0.1:%[2]d
			endpoint 127.0.0.1:%[3]d
		}
		model llama3 {
			path %[4]q
			mode whole
			endpoint 127.0.0.1:%[5]d
			endpoint 127.0.0.1:%[6]d
			engine_args %[7]s
		}
		model embed {
			path tiny
			mode whole
			embedding_model tiny-embed
			endpoint 127.0.0.1:%[8]d
		}
	}
}
`

// modelsSite loads threeModels with engineArgs for the second model.
func modelsSite(t *testing.T, ports []int, dir, engineArgs string) {
	t.Helper()
	cf := fmt.Sprintf(threeModels, ports[0], ports[1], ports[2], dir, ports[3], ports[4], engineArgs, ports[5])
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, cf)
	}
	loadConfig(t, cfg)
}

// modelPIDs returns the engine PIDs of each live model, by name, as
// /mlc/engines shows them.
func modelPIDs(t *testing.T) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, r := range liveNow().lifecycle.Statuses() {
		for _, e := range r.Engines {
			out[r.Model] = append(out[r.Model], e.PID)
		}
	}
	return out
}

// One mlc_router, three models: each request goes to its model's fleet
// and gets one engine's text; /v1/models lists the three; embeddings are
// the engine's own, float and base64; an unknown model is a 404 naming
// the served ones; a reload that changes one model restarts that model's
// engines only, failing no request of either; the readiness path follows
// the engines.
func TestManyModels(t *testing.T) {
	dir := npmref.ModelDir(t, "llama3")
	ports := freePorts(t, 6)
	modelsSite(t, ports, dir, "--overrides max_num_sequence=8")
	t.Cleanup(func() { stopCaddy(t) })
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	engine := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[i]) }
	waitFor(t, "every model ready", func() bool { return get(t, base+"/healthz") == http.StatusOK })

	var list protocol.ModelList
	if err := json.Unmarshal(getBody(t, base+"/v1/models"), &list); err != nil || len(list.Data) != 4 ||
		list.Data[0].ID != "tiny" || list.Data[1].ID != "llama3" || list.Data[2].ID != "embed" || list.Data[3].ID != "tiny-embed" {
		t.Fatalf("models: %+v %v", list, err)
	}
	for _, id := range []string{"tiny", "tiny-embed"} {
		if status := get(t, base+"/v1/models/"+id); status != http.StatusOK {
			t.Errorf("GET /v1/models/%s: %d", id, status)
		}
	}

	// Completions and chat: each model's answer is its engines' own. A
	// request without a model goes to the first model.
	for _, c := range []struct {
		model  string
		engine string
	}{{"tiny", engine(2)}, {"llama3", engine(4)}, {"embed", engine(5)}, {"", engine(2)}} {
		body := greedy("the river runs to the sea", 10)
		want := completionText(t, post(t, c.engine+protocol.PathCompletions, body, 200))
		if c.model != "" {
			body["model"] = c.model
		}
		if got := completionText(t, post(t, base+protocol.PathCompletions, body, 200)); got != want {
			t.Errorf("model %q: %q, engine %q", c.model, got, want)
		}
		chatBody := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 6, "temperature": 0}
		wantChat := chatText(t, post(t, c.engine+protocol.PathChatCompletions, chatBody, 200))
		if c.model != "" {
			chatBody["model"] = c.model
		}
		if got := chatText(t, post(t, base+protocol.PathChatCompletions, chatBody, 200)); strings.Join(got, "|") != strings.Join(wantChat, "|") {
			t.Errorf("model %q chat: %q, engine %q", c.model, got, wantChat)
		}
	}

	// Embeddings: the engine's vectors, bit for bit, by the embedding
	// model's own name and by its chat model's.
	for _, format := range []string{"float", "base64"} {
		for _, name := range []string{"tiny-embed", "embed"} {
			body := map[string]any{"input": []any{"the cat sat", "by the river"}, "encoding_format": format, "dimensions": 16}
			var want, got protocol.EmbeddingResponse
			mustUnmarshal(t, post(t, engine(5)+protocol.PathEmbeddings, body, 200), &want)
			body["model"] = name
			mustUnmarshal(t, post(t, base+protocol.PathEmbeddings, body, 200), &got)
			if got.Model != name || len(got.Data) != 2 || got.Usage != want.Usage {
				t.Fatalf("%s %s: %+v, engine %+v", name, format, got, want)
			}
			for i := range got.Data {
				g, w := got.Data[i].Embedding, want.Data[i].Embedding
				if g.Base64 != (format == "base64") || len(g.Floats) != 16 || fmt.Sprint(g.Floats) != fmt.Sprint(w.Floats) {
					t.Fatalf("%s %s input %d: %v, engine %v", name, format, i, g, w)
				}
			}
		}
	}
	notFound := apiError{404, protocol.ErrTypeInvalidRequest, protocol.CodeModelNotFound, "model"}
	checkError(t, "tiny embeddings", http.StatusNotFound, post(t, base+protocol.PathEmbeddings, map[string]any{"model": "tiny", "input": "x"}, 404), notFound)
	raw := post(t, base+protocol.PathCompletions, map[string]any{"model": "tiny-embed", "prompt": "hi"}, 404)
	checkError(t, "a completion of the embedding model", http.StatusNotFound, raw, notFound)
	if !strings.Contains(string(raw), "embedding model") {
		t.Errorf("a completion of the embedding model: %s", raw)
	}

	// An unknown model: a 404 that names the served ones, embedding
	// models too.
	for _, path := range []string{protocol.PathCompletions, protocol.PathEmbeddings} {
		raw := post(t, base+path, map[string]any{"model": "gpt-4", "prompt": "hi", "input": "hi"}, 404)
		if !strings.Contains(string(raw), `\"tiny\", \"llama3\", \"embed\", \"tiny-embed\"`) || !strings.Contains(string(raw), protocol.CodeModelNotFound) {
			t.Fatalf("unknown model at %s: %s", path, raw)
		}
	}

	// A reload that changes only llama3's engine args: new engines for it,
	// the same for the others, and no request of either fails meanwhile.
	before := modelPIDs(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	served := map[string]int{}
	for _, model := range []string{"tiny", "llama3"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, _ := json.Marshal(map[string]any{"model": model, "prompt": "keep going", "max_tokens": 4, "temperature": 0})
				resp, err := httpClient().Post(base+protocol.PathCompletions, "application/json", strings.NewReader(string(b)))
				// A reload closes the old server's idle keep-alive
				// connections, and Linux resets those still in its accept
				// queue, before the router reads anything: clients retry
				// such connection errors (startLoad in reload_test.go).
				for try := 1; try <= 5 && err != nil; try++ {
					time.Sleep(time.Duration(try) * 20 * time.Millisecond) // client backoff, not synchronisation
					resp, err = httpClient().Post(base+protocol.PathCompletions, "application/json", strings.NewReader(string(b)))
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, model+": "+err.Error())
				} else {
					if resp.StatusCode != 200 {
						failures = append(failures, fmt.Sprintf("%s: %d", model, resp.StatusCode))
					}
					resp.Body.Close()
					served[model]++
				}
				mu.Unlock()
			}
		}()
	}
	var stopOnce sync.Once
	stopLoad := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	t.Cleanup(stopLoad) // before Caddy stops, on every way out of the test
	waitFor(t, "load on both models", func() bool { mu.Lock(); defer mu.Unlock(); return served["tiny"] > 2 && served["llama3"] > 2 })
	modelsSite(t, ports, dir, "--overrides max_num_sequence=6")
	waitFor(t, "llama3's new engines", func() bool {
		after := modelPIDs(t)
		return len(after["llama3"]) == 2 && after["llama3"][0] != before["llama3"][0] && after["llama3"][0] > 0 && after["llama3"][1] > 0 &&
			get(t, base+"/healthz") == http.StatusOK
	})
	mark := map[string]int{}
	mu.Lock()
	for k, v := range served {
		mark[k] = v
	}
	mu.Unlock()
	waitFor(t, "requests on the new engines", func() bool { mu.Lock(); defer mu.Unlock(); return served["llama3"] > mark["llama3"]+2 })
	stopLoad()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed across the reload: %q", len(failures), failures[:min(len(failures), 5)])
	}
	after := modelPIDs(t)
	for _, m := range []string{"tiny", "embed"} {
		if fmt.Sprint(after[m]) != fmt.Sprint(before[m]) {
			t.Errorf("model %s's engines changed: %v, were %v", m, after[m], before[m])
		}
	}

	// Readiness: 503 naming the model while its only engine is frozen,
	// 200 once it answers again.
	embedPID := after["embed"][0]
	if err := syscall.Kill(embedPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(embedPID, syscall.SIGCONT)
	waitFor(t, "a 503 from the readiness path", func() bool { return get(t, base+"/healthz") == http.StatusServiceUnavailable })
	if body := string(getBody(t, base+"/healthz")); !strings.Contains(body, "embed: no engine is ready") {
		t.Fatalf("readiness body: %s", body)
	}
	if err := syscall.Kill(embedPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "readiness again", func() bool { return get(t, base+"/healthz") == http.StatusOK })
}

// get returns the status of GET url.
func get(t *testing.T, url string) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// getBody returns the body of GET url.
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := httpClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// completionText is the text of a whole completion's one choice.
func completionText(t *testing.T, raw []byte) string {
	t.Helper()
	var resp protocol.CompletionResponse
	mustUnmarshal(t, raw, &resp)
	if len(resp.Choices) != 1 {
		t.Fatalf("choices: %s", raw)
	}
	return resp.Choices[0].Text
}

func mustUnmarshal(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
}
