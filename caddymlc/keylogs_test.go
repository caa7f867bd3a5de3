package caddymlc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// keysLoggedSite starts a router with routerOpts (KEYS in them: a keys
// file holding key), whose Caddy logs everything at DEBUG into one file
// and its access log (Caddy's log directive, at DEBUG, with log_append
// of a router variable) into another; serverOpts go into the servers
// global option.
func keysLoggedSite(t *testing.T, serverOpts, routerOpts, key string) (s *site, logs, access string) {
	t.Helper()
	ports := freePorts(t, 2)
	dir := t.TempDir()
	logs, access = filepath.Join(dir, "caddy.log"), filepath.Join(dir, "access.log")
	keys := filepath.Join(dir, "keys.jsonl")
	writeKeys(t, keys, keyLine("team-a", key))
	loadCaddyfile(t, fmt.Sprintf(`{
	admin off
	auto_https off
	skip_install_trust
	log {
		output file %s
		level DEBUG
	}
	servers {
%s	}
}
http://127.0.0.1:%d {
	log {
		output file %s
		level DEBUG
	}
	route {
		log_append mlc_tenant mlc_tenant
		mlc_router {
			model tiny
			mode whole
			endpoint 127.0.0.1:%d
%s		}
	}
}
`, logs, serverOpts, ports[0], access, ports[1], strings.ReplaceAll(routerOpts, "KEYS", keys)))
	return &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}, logs, access
}

// loggedLines is the JSON lines of the file at path.
func loggedLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// No credential the router reads is in any log line, at any level:
// requests of every API, streamed and not, with the key as Authorization
// and X-Api-Key (Anthropic's SDKs) or Api-Key (Azure's), and the error
// paths (a wrong key, an address held, a bad body, an unknown model),
// with Caddy's log directive at DEBUG, with and without log_credentials,
// and a tenant read from X-Api-Key without keys. Each request still has
// its access log line, showing the headers REDACTED and the router's
// variables.
func TestKeysNeverLogged(t *testing.T) {
	const key, wrong = "sk-mlc-known-secret-0123456789", "sk-mlc-wrong-secret-9876543210"
	const keys = "\t\t\tkeys KEYS\n\t\t\tauth_failures 2\n"
	for _, c := range []struct{ name, serverOpts, routerOpts string }{
		{"keys", "", keys},
		{"log_credentials", "\t\tlog_credentials\n", keys},
		{"tenant", "", "\t\t\ttenant {http.request.header.X-Api-Key}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, logs, access := keysLoggedSite(t, c.serverOpts, c.routerOpts, key)
			both := http.Header{"Authorization": {"Bearer " + key}, "X-Api-Key": {key}}
			sent := 0
			send := func(path string, h http.Header, body any, want int) {
				t.Helper()
				sent++
				if status, raw := s.send(path, h, body); status != want {
					t.Fatalf("%s %v: %d %s, want %d", path, body, status, raw, want)
				}
			}
			for _, a := range everyAPI() {
				send(a.path, both, a.body, http.StatusOK)
			}
			if c.routerOpts == keys {
				send(protocol.PathModels, http.Header{"Api-Key": {key}}, nil, http.StatusOK)
				send(protocol.PathCompletions, both, map[string]any{"prompt": 7}, http.StatusBadRequest)
				send(protocol.PathCompletions, both, map[string]any{"model": "gpt-4", "prompt": "x"}, http.StatusNotFound)
				for _, want := range []int{401, 401, 429} {
					send(protocol.PathMessages, http.Header{"X-Api-Key": {wrong}}, map[string]any{"model": "tiny", "max_tokens": 1}, want)
				}
				send(protocol.PathMessages, http.Header{"X-Api-Key": {key}}, map[string]any{"model": "tiny", "max_tokens": 1, "messages": []map[string]any{{"role": "user", "content": "x"}}}, http.StatusOK)
			}
			waitFor(t, fmt.Sprintf("%d access log lines", sent), func() bool { return len(loggedLines(t, access)) >= sent })
			stopCaddy(t)

			for _, path := range []string{logs, access} {
				b, _ := os.ReadFile(path)
				for _, secret := range []string{key, wrong} {
					if n := bytes.Count(b, []byte(secret)); n != 0 {
						t.Errorf("%s: a key %d times", filepath.Base(path), n)
					}
				}
			}
			lines := loggedLines(t, access)
			if len(lines) != sent {
				t.Fatalf("%d access log lines, want one for each of the %d requests", len(lines), sent)
			}
			tenants := 0
			for _, l := range lines {
				req, _ := l["request"].(map[string]any)
				headers, _ := req["headers"].(map[string]any)
				if l["msg"] != "handled request" || l["status"] == nil || l["duration"] == nil || req["uri"] == nil || len(headers) == 0 {
					t.Errorf("an access log line unlike Caddy's: %v", l)
				}
				for _, name := range []string{"X-Api-Key", "Api-Key"} {
					if v, ok := headers[name]; ok && fmt.Sprint(v) != "[REDACTED]" {
						t.Errorf("%s: %v", name, v)
					}
				}
				if tenant, _ := l["mlc_tenant"].(string); tenant != "" {
					tenants++
				}
			}
			if tenants < len(everyAPI()) {
				t.Errorf("%d access log lines carry the tenant, want at least %d", tenants, len(everyAPI()))
			}
		})
	}
}
