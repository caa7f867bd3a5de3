package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// With keys redis, the keys are the cluster's: a key made through one
// replica's admin API is accepted by all three replicas within a second,
// and once revoked through another's, refused by all three within a
// second. Redis holds its hash, never the key.
func TestKeysRedisAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ports := freePorts(t, 6)
	eng := fmt.Sprintf("127.0.0.1:%d", ports[0])
	startEngineProc(t, eng, nil)
	const opts = "\t\tkeys redis\n\t\tbudget * tokens_per_minute 100000\n"
	startReplica(t, replicaConfig(fmt.Sprintf("127.0.0.1:%d", ports[4]), srv.Addr(), ports[2], opts, eng))
	startReplica(t, replicaConfig(fmt.Sprintf("127.0.0.1:%d", ports[5]), srv.Addr(), ports[3], opts, eng))
	loadCaddyfile(t, replicaConfig("off", srv.Addr(), ports[1], opts, eng))
	waitClusterUp(t, liveCluster(t))
	waitReplicaClusterUp(t, ports[4])
	waitReplicaClusterUp(t, ports[5])
	var bases []string
	for _, p := range ports[1:4] {
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", p))
	}

	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/mlc/keys", ports[4]), "application/json", strings.NewReader(`{"name": "team-a"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var made struct{ Name, Key string }
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &made) != nil || !strings.HasPrefix(made.Key, "sk-mlc-") {
		t.Fatalf("POST /mlc/keys: %d %s", resp.StatusCode, raw)
	}
	status := func(base string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+made.Key)
		resp, err := httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	within := func(what string, want int) {
		t.Helper()
		begin := time.Now()
		for _, base := range bases {
			for status(base) != want {
				if time.Since(begin) > time.Second {
					t.Fatalf("%s: %s still answers %d after %v, want %d", what, base, status(base), time.Since(begin), want)
				}
				time.Sleep(10 * time.Millisecond) // a poll under a deadline, as waitFor's
			}
		}
		t.Logf("%s: all three replicas answer %d after %v", what, want, time.Since(begin).Round(time.Millisecond))
	}
	within("made", http.StatusOK)
	// Served through every replica and API, budgets and stored responses
	// in Redis: the key is nowhere there, nor in the metrics.
	for i, base := range bases {
		for _, c := range []struct{ path, body string }{
			{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`},
			{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`},
			{"/v1/messages", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`},
			{"/v1/responses", `{"input":"hi","max_output_tokens":4}`},
		} {
			req, _ := http.NewRequest(http.MethodPost, base+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+made.Key)
			resp, err := httpClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("replica %d %s: %d %s", i, c.path, resp.StatusCode, raw)
			}
		}
	}
	for _, port := range ports[4:] {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), `tenant="team-a"`) || strings.Contains(string(raw), made.Key) {
			t.Fatalf("the metrics name the tenant team-a: %v; hold the key: %v", strings.Contains(string(raw), `tenant="team-a"`), strings.Contains(string(raw), made.Key))
		}
	}
	if dump := redisContents(t, srv.Addr()); !strings.Contains(dump, ":keys") || strings.Contains(dump, made.Key) {
		t.Fatalf("Redis holds the keys' hash %v, and the key itself %v", strings.Contains(dump, ":keys"), strings.Contains(dump, made.Key))
	}

	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("http://127.0.0.1:%d/mlc/keys/team-a", ports[5]), nil)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /mlc/keys/team-a: %v %v", resp, err)
	}
	resp.Body.Close()
	within("revoked", http.StatusUnauthorized)
}

// redisContents is every key of the Redis at addr with its value, as
// text: what a secret must not be found in.
func redisContents(t *testing.T, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = ", k)
		switch typ, _ := c.Type(ctx, k).Result(); typ {
		case "string":
			fmt.Fprint(&b, c.Get(ctx, k).Val())
		case "hash":
			fmt.Fprint(&b, c.HGetAll(ctx, k).Val())
		case "zset":
			fmt.Fprint(&b, c.ZRangeWithScores(ctx, k, 0, -1).Val())
		case "list":
			fmt.Fprint(&b, c.LRange(ctx, k, 0, -1).Val())
		case "set":
			fmt.Fprint(&b, c.SMembers(ctx, k).Val())
		}
		b.WriteByte('\n')
	}
	return b.String()
}
