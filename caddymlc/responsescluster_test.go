package caddymlc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// tenantCall sends a JSON body (nil: none) as tenant and returns the
// status and the answer.
func tenantCall(t *testing.T, method, url, tenant string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant", tenant)
	resp, err := httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// With the cluster option the responses live in the cluster's Redis: a
// conversation begun on one replica continues on the other through
// previous_response_id, with the text of the same turns as chat
// messages; another tenant gets a 404 on either; a DELETE on one is a
// 404 on the other; with Redis gone a read is a 503, not a 404.
func TestClusterResponsesAcrossReplicas(t *testing.T) {
	srv, bases := startTwoReplicas(t, "\t\ttenant {http.request.header.X-Tenant}\n")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	storedKeys := func() int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, err := rdb.Keys(ctx, "caddy-mlc:responses:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}

	// Three turns, alternating replicas, each continuing the last.
	const maxTokens = 4
	chat := []map[string]any{}
	prev := ""
	var ids []string
	for turn, input := range []string{"the cat sat on", "and then the dog", "and the bird"} {
		body := map[string]any{"model": "tiny", "input": input, "max_output_tokens": maxTokens, "temperature": 0}
		if prev != "" {
			body["previous_response_id"] = prev
		}
		status, raw := tenantCall(t, http.MethodPost, bases[turn%2]+protocol.PathResponses, "alice", body)
		var r protocol.Response
		if status != http.StatusOK || json.Unmarshal(raw, &r) != nil || !r.Store {
			t.Fatalf("turn %d on replica %d: %d %s", turn, turn%2, status, raw)
		}
		chat = append(chat, map[string]any{"role": "user", "content": input})
		want, _ := greedyChat(t, bases[0], maxTokens, chat)
		if got := r.Output[0].Text(); got != want {
			t.Fatalf("turn %d: %q, chat answers %q", turn, got, want)
		}
		chat = append(chat, map[string]any{"role": "assistant", "content": want})
		prev = r.ID
		ids = append(ids, r.ID)
	}
	if n := storedKeys(); n != len(ids) {
		t.Fatalf("%d responses in Redis, want %d: the replicas do not keep them there", n, len(ids))
	}

	for i, base := range bases {
		if status, raw := tenantCall(t, http.MethodGet, base+protocol.PathResponses+"/"+ids[0], "alice", nil); status != http.StatusOK {
			t.Errorf("alice reads the first turn on replica %d: %d %s", i, status, raw)
		}
		if status, raw := tenantCall(t, http.MethodGet, base+protocol.PathResponses+"/"+ids[0], "bob", nil); status != http.StatusNotFound {
			t.Errorf("bob reads alice's response on replica %d: %d %s", i, status, raw)
		}
		status, raw := tenantCall(t, http.MethodPost, base+protocol.PathResponses, "bob",
			map[string]any{"input": "more", "previous_response_id": ids[0], "max_output_tokens": 2})
		if status != http.StatusNotFound {
			t.Errorf("bob continues alice's response on replica %d: %d %s", i, status, raw)
		}
	}

	// Deleted on replica A, gone on replica B.
	if status, raw := tenantCall(t, http.MethodDelete, bases[0]+protocol.PathResponses+"/"+ids[2], "alice", nil); status != http.StatusOK {
		t.Fatalf("delete on replica A: %d %s", status, raw)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if status, raw := tenantCall(t, method, bases[1]+protocol.PathResponses+"/"+ids[2], "alice", nil); status != http.StatusNotFound {
			t.Errorf("%s on replica B after the delete on A: %d %s", method, status, raw)
		}
	}
	if n := storedKeys(); n != len(ids)-1 {
		t.Fatalf("%d responses in Redis after the delete, want %d", n, len(ids)-1)
	}

	// Redis gone: what is stored is out of reach, not missing.
	srv.Kill()
	status, raw := tenantCall(t, http.MethodGet, bases[0]+protocol.PathResponses+"/"+ids[0], "alice", nil)
	var e protocol.ErrorBody
	if status != http.StatusServiceUnavailable || json.Unmarshal(raw, &e) != nil || e.Error.Type != protocol.ErrTypeUnavailable {
		t.Fatalf("a read with Redis gone: %d %s", status, raw)
	}
}

// responses_store redis without the cluster option is refused; with the
// option, a path keeps the responses in that SQLite file, not in Redis.
func TestClusterResponsesStoreChoice(t *testing.T) {
	ports := freePorts(t, 2)
	cf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n\t\tendpoint 127.0.0.1:%d\n\t\tresponses_store redis\n\t}\n}\n", ports[0], ports[1])
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err == nil || !strings.Contains(err.Error(), "cluster option") {
		t.Fatalf("responses_store redis without a cluster: %v", err)
	}

	srv := redistest.Start(t)
	file := filepath.Join(t.TempDir(), "responses.db")
	loadCaddyfile(t, clusterSite(ports[0], "\t\t\tredis "+srv.Addr()+"\n", "\t\tresponses_store "+file+"\n", ports[1]))
	waitClusterUp(t, liveCluster(t))
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	var r protocol.Response
	mustUnmarshal(t, post(t, base+protocol.PathResponses, map[string]any{"input": "the cat sat on", "max_output_tokens": 3}, http.StatusOK), &r)
	if status, raw := httpCall(t, http.MethodGet, base+protocol.PathResponses+"/"+r.ID, ""); status != http.StatusOK {
		t.Fatalf("read back: %d %s", status, raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n := liveCluster(t).Client().DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys in Redis with responses_store a file", n)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the SQLite file: %v", err)
	}
}
