package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// With keys redis, the keys are the cluster's: a key made through one
// replica's admin API is accepted by all three replicas within a second,
// and once revoked through another's, refused by all three within a
// second. Redis holds its hash, never the key.
func TestKeysRedisAcrossReplicas(t *testing.T) {
	bases, admins, redisAt := startKeyReplicas(t, 3, "\t\tkeys redis\n\t\tauth_failures off\n\t\tbudget * tokens_per_minute 100000\n")
	resp, err := http.Post(admins[0]+"/mlc/keys", "application/json", strings.NewReader(`{"name": "team-a"}`))
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
	for _, admin := range admins {
		resp, err := http.Get(admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), `tenant="team-a"`) || strings.Contains(string(raw), made.Key) {
			t.Fatalf("the metrics name the tenant team-a: %v; hold the key: %v", strings.Contains(string(raw), `tenant="team-a"`), strings.Contains(string(raw), made.Key))
		}
	}
	if dump := redisContents(t, redisAt); !strings.Contains(dump, ":keys") || strings.Contains(dump, made.Key) {
		t.Fatalf("Redis holds the keys' hash %v, and the key itself %v", strings.Contains(dump, ":keys"), strings.Contains(dump, made.Key))
	}

	req, _ := http.NewRequest(http.MethodDelete, admins[1]+"/mlc/keys/team-a", nil)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /mlc/keys/team-a: %v %v", resp, err)
	}
	resp.Body.Close()
	within("revoked", http.StatusUnauthorized)
}

// startKeyReplicas starts a Redis, one engine and n replicas with the
// cluster option and routerOpts: one in this process (no admin
// endpoint), the others child Caddys; it returns their base URLs and the
// children's admin URLs and the Redis's address once every cluster is
// up.
func startKeyReplicas(t *testing.T, n int, routerOpts string) (bases, admins []string, redisAt string) {
	t.Helper()
	srv := redistest.Start(t)
	ports := freePorts(t, 2*n+1)
	eng := fmt.Sprintf("127.0.0.1:%d", ports[0])
	startEngineProc(t, eng, nil)
	for i := 1; i < n; i++ {
		admin := fmt.Sprintf("127.0.0.1:%d", ports[n+1+i])
		startReplica(t, replicaConfig(admin, srv.Addr(), ports[1+i], routerOpts, eng))
		admins = append(admins, "http://"+admin)
	}
	loadCaddyfile(t, replicaConfig("off", srv.Addr(), ports[1], routerOpts, eng))
	waitClusterUp(t, liveCluster(t))
	for i := 1; i < n; i++ {
		waitReplicaClusterUp(t, ports[n+1+i])
	}
	for _, p := range ports[1 : n+1] {
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	return bases, admins, srv.Addr()
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

// With the cluster, an address's failed key checks count on every
// replica: past auth_failures on one replica, the other holds it too,
// before it saw as many itself.
func TestKeysFailuresAcrossReplicas(t *testing.T) {
	bases, _, _ := startKeyReplicas(t, 2, "\t\tkeys redis\n\t\tauth_failures 3\n")
	bad := func(base string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer sk-guess")
		resp, err := httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 4 {
		bad(bases[1])
	}
	if got := bad(bases[1]); got != http.StatusTooManyRequests {
		t.Fatalf("the replica that saw 4 failures answers %d, want 429", got)
	}
	// Alone, the other replica would answer 401 to its first 3.
	for try := 1; ; try++ {
		got := bad(bases[0])
		if got == http.StatusTooManyRequests {
			t.Logf("the other replica held the address at its try %d", try)
			return
		}
		if try == 3 {
			t.Fatalf("the other replica answered %d to its 3rd try: it did not count the first replica's failures", got)
		}
		time.Sleep(200 * time.Millisecond) // the bus flushes every 10 ms
	}
}

// With several sites on one cluster, every site counts every failure:
// the other replica's, and its own replica's other site's, at once.
func TestKeysFailuresAcrossSites(t *testing.T) {
	srv := redistest.Start(t)
	ports := freePorts(t, 5)
	eng := fmt.Sprintf("127.0.0.1:%d", ports[0])
	startEngineProc(t, eng, nil)
	dir := t.TempDir()
	keys, logFile := filepath.Join(dir, "keys.jsonl"), filepath.Join(dir, "caddy.log")
	writeKeys(t, keys, keyLine("a", "sk-a"))
	opts := fmt.Sprintf("\t\tkeys %s\n\t\tauth_failures 3\n", keys)
	startReplica(t, replicaConfig(fmt.Sprintf("127.0.0.1:%d", ports[4]), srv.Addr(), ports[3], opts, eng))
	var cf strings.Builder
	fmt.Fprintf(&cf, "{\n\tadmin off\n\tauto_https off\n\tlog {\n\t\toutput file %s\n\t\tlevel WARN\n\t}\n\tmlc {\n\t\tcluster {\n\t\t\tredis %s\n\t\t\treplicas 2\n\t\t}\n\t}\n}\n", logFile, srv.Addr())
	for _, p := range ports[1:3] {
		fmt.Fprintf(&cf, "http://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n%s\t\tendpoint %s external\n\t}\n}\n", p, opts, eng)
	}
	loadCaddyfile(t, cf.String())
	waitClusterUp(t, liveCluster(t))
	waitReplicaClusterUp(t, ports[4])
	sites := []*site{
		{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[1]), client: httpClient()},
		{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[2]), client: httpClient()},
	}
	child := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[3]), client: httpClient()}
	waitFor(t, "the other replica to answer", func() bool {
		resp, err := http.Get(child.base + protocol.PathModels)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	})

	// The other replica's failures: each site's limiter holds the
	// address, as its log says.
	for i, want := range []int{401, 401, 401, 429} {
		if status, raw := child.send(protocol.PathCompletions, bearer("sk-guess"), greedy("x", 1)); status != want {
			t.Fatalf("the other replica, guess %d: %d %s, want %d", i, status, raw, want)
		}
	}
	waitFor(t, "both sites to hold 127.0.0.1", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Count(string(b), `"client":"127.0.0.1"`) == 2
	})
	for i, s := range sites {
		if status, raw := s.send(protocol.PathCompletions, bearer("sk-guess"), greedy("x", 1)); status != 429 {
			t.Errorf("site %d, after the other replica's failures: %d %s, want 429", i, status, raw)
		}
		if status, raw := s.send(protocol.PathCompletions, bearer("sk-a"), greedy("x", 1)); status != 200 {
			t.Errorf("site %d, the good key: %d %s, want 200", i, status, raw)
		}
	}

	// This replica's other site's failures, heard at once.
	other := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	for i, want := range []int{401, 401, 401, 429} {
		if status, raw := (&site{t: t, base: sites[0].base, client: other}).send(protocol.PathCompletions, bearer("sk-guess"), greedy("x", 1)); status != want {
			t.Fatalf("site 0, guess %d from 127.0.0.2: %d %s, want %d", i, status, raw, want)
		}
	}
	if status, raw := (&site{t: t, base: sites[1].base, client: other}).send(protocol.PathCompletions, bearer("sk-guess"), greedy("x", 1)); status != 429 {
		t.Errorf("site 1, its first guess from 127.0.0.2 after site 0's: %d %s, want 429", status, raw)
	}
}
