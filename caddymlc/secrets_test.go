package caddymlc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// keyedSite is a router whose tenant is the Authorization header (as
// docs/tenants.md used to advise), logging everything at DEBUG level and
// every access with its tenant into files, and keeping stored responses
// in an SQLite file: the places a key could leak to.
type keyedSite struct {
	*site
	logs, accessLog, store string
}

func startKeyedSite(t *testing.T, opts string) keyedSite {
	t.Helper()
	ports := freePorts(t, 2)
	dir := t.TempDir()
	k := keyedSite{site: &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()},
		logs: filepath.Join(dir, "caddy.log"), accessLog: filepath.Join(dir, "access.log"), store: filepath.Join(dir, "store", "responses.db")}
	loadCaddyfile(t, fmt.Sprintf(`{
	admin off
	auto_https off
	skip_install_trust
	log {
		output file %s
		level DEBUG
	}
}
http://127.0.0.1:%d {
	log {
		output file %s
		format json
	}
	route {
		log_append mlc_request_id mlc_request_id
		log_append mlc_tenant mlc_tenant
		mlc_router {
			model tiny
			mode whole
			endpoint 127.0.0.1:%d
			slo_ttft 60000
			responses_store %s
%s		}
	}
}
`, k.logs, ports[0], k.accessLog, ports[1], k.store, opts))
	return k
}

// send posts body to path with the header, and returns the status and
// the whole answer (a stream read to its end).
func (s *site) send(path string, header http.Header, body any) (int, []byte) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.base+path, bytes.NewReader(b))
	if body == nil {
		req.Method = http.MethodGet
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// everyAPI is a request of every generating API, streamed and not.
func everyAPI() []struct {
	path string
	body map[string]any
} {
	msgs := []map[string]any{{"role": "user", "content": "the cat sat on"}}
	var out []struct {
		path string
		body map[string]any
	}
	for _, stream := range []bool{false, true} {
		out = append(out, []struct {
			path string
			body map[string]any
		}{
			{protocol.PathCompletions, map[string]any{"prompt": "the cat sat on", "max_tokens": 4, "stream": stream}},
			{protocol.PathChatCompletions, map[string]any{"messages": msgs, "max_tokens": 4, "stream": stream}},
			{protocol.PathMessages, map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 4, "stream": stream}},
			{protocol.PathResponses, map[string]any{"model": "tiny", "input": "the cat sat on", "max_output_tokens": 4, "stream": stream}},
		}...)
	}
	return out
}

// A tenant read from the Authorization header is its digest everywhere:
// after requests of every API, streamed and not, the key is in none of
// the metrics, /mlc/engines, the logs, or the responses store, and the
// digest is (the tenant did flow through them); the store's file is
// its owner's only.
func TestTenantKeyNeverShown(t *testing.T) {
	const key = "sk-secret-0123456789abcdef"
	k := startKeyedSite(t, "\t\t\ttenant {http.request.header.Authorization}\n")
	digest := apikeys.TenantDigest("Bearer " + key)
	h := http.Header{"Authorization": {"Bearer " + key}}
	for _, c := range everyAPI() {
		if status, raw := k.send(c.path, h, c.body); status != http.StatusOK {
			t.Fatalf("%s %v: %d %s", c.path, c.body, status, raw)
		}
	}
	waitLogged(t, k.accessLog, len(everyAPI()))
	places := map[string][]byte{"metrics": metricsText(t), "/mlc/engines": mustMarshal(t, liveNow().lifecycle.Statuses())}
	for name, paths := range map[string][]string{"log": {k.logs}, "access log": {k.accessLog}, "store": {k.store, k.store + "-wal"}} {
		for _, path := range paths {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			places[name] = append(places[name], b...)
		}
	}
	for name, b := range places {
		if n := bytes.Count(b, []byte(key)); n != 0 {
			t.Errorf("%s: the key %d times", name, n)
		}
		if name != "log" && !bytes.Contains(b, []byte(digest)) {
			t.Errorf("%s: no tenant %s", name, digest)
		}
	}
	if !bytes.Contains(places["log"], []byte("tenant reads a credential")) {
		t.Error("no warning that the tenant reads a credential")
	}
	assertPrivate(t, k.store)
}

// assertPrivate fails unless the store's file (and its WAL) is its
// owner's only, and so is its folder.
func assertPrivate(t *testing.T, store string) {
	t.Helper()
	for path, want := range map[string]os.FileMode{store: 0o600, store + "-wal": 0o600, filepath.Dir(store): 0o700} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", path, st.Mode().Perm(), want)
		}
	}
}

// metricsText is every metric of the module, as text.
func metricsText(t *testing.T) []byte {
	t.Helper()
	families, err := metricsRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		b.WriteString(f.String())
	}
	return []byte(b.String())
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
