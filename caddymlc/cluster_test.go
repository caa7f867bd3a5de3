package caddymlc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// The mlc global option is the mlc app's config.
func TestClusterOptionAdapts(t *testing.T) {
	cf := `{
	mlc {
		cluster {
			redis      redis.internal:6380
			username   {env.REDIS_USERNAME}
			password   {env.REDIS_PASSWORD}
			tls {
				server_name redis.internal
				ca          /etc/redis/ca.pem
			}
			key_prefix prod
			replicas   3
			timeout    80ms
		}
	}
}
:8080 {
	respond ok
}
`
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps map[string]json.RawMessage `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	var app App
	if err := json.Unmarshal(cfg.Apps["mlc"], &app); err != nil {
		t.Fatalf("%v: %s", err, cfg.Apps["mlc"])
	}
	want := Cluster{Redis: "redis.internal:6380", Username: "{env.REDIS_USERNAME}", Password: "{env.REDIS_PASSWORD}",
		TLS: &ClusterTLS{ServerName: "redis.internal", CA: "/etc/redis/ca.pem"}, KeyPrefix: "prod", Replicas: 3, Timeout: caddy.Duration(80 * time.Millisecond)}
	if app.Cluster == nil || fmt.Sprint(*app.Cluster.TLS) != fmt.Sprint(*want.TLS) {
		t.Fatalf("got %s", cfg.Apps["mlc"])
	}
	got := *app.Cluster
	got.TLS, want.TLS = nil, nil
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{
		"cluster {\n}",
		"cluster {\nredis a:1\nreplicas 0\n}",
		"cluster {\nredis a:1\nbogus 1\n}",
		"cluster {\nredis a:1\n}\ncluster {\nredis b:1\n}",
		"bogus",
	} {
		cf := "{\n\tmlc {\n" + bad + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
		if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

// clusterSite is a Caddyfile with the cluster option and one built-in
// engine; routerOpts go into the mlc_router block.
func clusterSite(httpPort int, clusterBlock, routerOpts string, engine int) string {
	return fmt.Sprintf(`{
	admin off
	auto_https off
	mlc {
		cluster {
%s		}
	}
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
		mode whole
		endpoint 127.0.0.1:%d
%s	}
}
`, clusterBlock, httpPort, engine, routerOpts)
}

// liveCluster returns the running config's cluster connection.
func liveCluster(t *testing.T) *cluster.Conn {
	t.Helper()
	a := liveNow().current.Load()
	if a == nil || a.cluster == nil {
		t.Fatal("no running config with a cluster")
	}
	return a.cluster.conn
}

// waitClusterUp waits until c answers.
func waitClusterUp(t *testing.T, c *cluster.Conn) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		up, changed := c.Watch()
		if up {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the cluster's Redis did not answer")
		}
	}
}

// A config with the cluster option connects to Redis with the password of
// a placeholder, shows caddy_mlc_cluster_up 1, keeps the connection
// across a reload, and shows the password nowhere.
func TestClusterConnectsAndSurvivesReload(t *testing.T) {
	const secret = "pw-from-the-environment"
	srv := redistest.Start(t, "--requirepass", secret)
	t.Setenv("CADDY_MLC_TEST_REDIS_PASSWORD", secret)
	ports := freePorts(t, 2)
	block := fmt.Sprintf("\t\t\tredis %s\n\t\t\tpassword {env.CADDY_MLC_TEST_REDIS_PASSWORD}\n", srv.Addr())
	cfg := clusterSite(ports[0], block, "", ports[1])
	loadCaddyfile(t, cfg)
	conn := liveCluster(t)
	waitClusterUp(t, conn)
	if g := metricValue(t, "caddy_mlc_cluster_up"); g != 1 {
		t.Fatalf("caddy_mlc_cluster_up = %v", g)
	}
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	if _, code, raw := s.complete(s.base, greedy("through a cluster", 4)); code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}

	// A reload that changes the router, not the option, keeps the
	// connection, up.
	reloadCaddyfile(t, clusterSite(ports[0], block, "\t\tmax_attempts 4\n", ports[1]))
	if liveCluster(t) != conn {
		t.Fatal("the reload made a new connection")
	}
	if !conn.Up() {
		t.Fatal("the connection went down with the reload")
	}
	if _, code, raw := s.complete(s.base, greedy("after the reload", 4)); code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}

	rec := httptest.NewRecorder()
	if err := serveEngines(rec, httptest.NewRequest("GET", "/mlc/engines", nil)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rec.Body.String(), secret) {
		t.Fatal("/mlc/engines shows the password")
	}
}

// A cluster option whose password Redis refuses: the config runs, and
// serves, with local state.
func TestClusterWrongPasswordServesLocally(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "right")
	ports := freePorts(t, 2)
	loadCaddyfile(t, clusterSite(ports[0], fmt.Sprintf("\t\t\tredis %s\n\t\t\tpassword wrong\n", srv.Addr()), "", ports[1]))
	conn := liveCluster(t)
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	if _, code, raw := s.complete(s.base, greedy("no cluster today", 4)); code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
	if conn.Up() {
		t.Fatal("up with a password Redis refuses")
	}
}

// reloadCaddyfile loads cf over the running config, as `caddy reload`.
func reloadCaddyfile(t *testing.T, cf string) {
	t.Helper()
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, cf)
	}
	loadConfig(t, cfg)
}

// startReplica runs cf in another Caddy process (this test binary, as
// `caddy run`), stopped when the test ends.
func startReplica(t *testing.T, cf string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(file, []byte(cf), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "--config", file, "--adapter", "caddyfile")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// waitReplicaClusterUp waits until the Caddy behind an admin endpoint
// shows caddy_mlc_cluster_up 1.
func waitReplicaClusterUp(t *testing.T, adminPort int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", adminPort)); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "\ncaddy_mlc_cluster_up 1\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the other replica's cluster never came up")
		}
		time.Sleep(20 * time.Millisecond) // another process: polled
	}
}

// replicaConfig is a replica's Caddyfile: the cluster option on redis,
// the router on httpPort with routerOpts, over external engines.
func replicaConfig(admin string, redis string, httpPort int, routerOpts string, engines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin %s\n\tauto_https off\n\tlog {\n\t\tlevel ERROR\n\t}\n\tmlc {\n\t\tcluster {\n\t\t\tredis %s\n\t\t\treplicas 2\n\t\t}\n\t}\n}\n", admin, redis)
	fmt.Fprintf(&b, "http://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n%s", httpPort, routerOpts)
	for _, e := range engines {
		fmt.Fprintf(&b, "\t\tendpoint %s external\n", e)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// startTwoReplicas starts a Redis, one engine, and two replicas with the
// cluster option and routerOpts: one in this process, one a child Caddy;
// it returns the Redis and the replicas' base URLs once both are on the
// cluster and the child answers.
func startTwoReplicas(t *testing.T, routerOpts string) (*redistest.Server, []string) {
	t.Helper()
	srv := redistest.Start(t)
	ports := freePorts(t, 4)
	eng := fmt.Sprintf("127.0.0.1:%d", ports[0])
	startEngineProc(t, eng, nil)
	startReplica(t, replicaConfig(fmt.Sprintf("127.0.0.1:%d", ports[3]), srv.Addr(), ports[2], routerOpts, eng))
	loadCaddyfile(t, replicaConfig("off", srv.Addr(), ports[1], routerOpts, eng))
	waitClusterUp(t, liveCluster(t))
	waitReplicaClusterUp(t, ports[3])
	bases := []string{fmt.Sprintf("http://127.0.0.1:%d", ports[1]), fmt.Sprintf("http://127.0.0.1:%d", ports[2])}
	waitAnswers(t, bases[1])
	return srv, bases
}

// Two replicas, one tenant with a budget of 6 requests a minute, its
// requests alternating between them: 6 are served in all, not 6 each, and
// both answer with the same x-ratelimit headers.
func TestClusterBudgetsAcrossReplicas(t *testing.T) {
	_, bases := startTwoReplicas(t, "\t\ttenant {http.request.header.X-Tenant}\n\t\tbudget * requests_per_minute 6\n")

	served := 0
	for i := range 12 {
		body, _ := json.Marshal(greedy(fmt.Sprintf("request %d", i), 2))
		req, _ := http.NewRequest(http.MethodPost, bases[i%2]+"/v1/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant", "shared-tenant")
		resp, err := httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			served++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if l := resp.Header.Get("X-Ratelimit-Limit-Requests"); l != "6" {
			t.Fatalf("request %d through replica %d: x-ratelimit-limit-requests %q, want 6 (the shared budget)", i, i%2, l)
		}
	}
	// A budget refills a request every 10 s: one more may fit.
	if served < 6 || served > 7 {
		t.Fatalf("%d requests served through two replicas for a budget of 6", served)
	}
}

// Two replicas with prefix_aware over two engines: a prompt one replica
// sent to an engine is expected there by the other (it learns it through
// Redis, within moments), which sends the prompt's continuations to the
// same engine.
func TestClusterSharesPrefixes(t *testing.T) {
	srv := redistest.Start(t)
	ports := freePorts(t, 5)
	engines := []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}
	for _, e := range engines {
		startEngineProc(t, e, nil, "--prefix-cache-mode", "radix")
	}
	bAdmin := ports[4]
	opts := "\t\tpolicy prefix_aware\n"
	startReplica(t, replicaConfig(fmt.Sprintf("127.0.0.1:%d", bAdmin), srv.Addr(), ports[3], opts, engines...))
	loadCaddyfile(t, replicaConfig("off", srv.Addr(), ports[2], opts, engines...))
	waitClusterUp(t, liveCluster(t))
	waitReplicaClusterUp(t, bAdmin)
	a := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[2]), client: httpClient()}
	b := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[3]), client: httpClient()}
	waitAnswers(t, b.base)
	// Replica A's indexes are bounded by its engines' KV capacity, which it
	// learns from their load reports: until then it keeps nothing it hears.
	waitFor(t, "replica A to know its engines' KV capacity", func() bool {
		for _, e := range liveNow().lifecycle.Statuses()[0].Engines {
			if e.Load == nil || e.Load.KVPages == 0 {
				return false
			}
		}
		return true
	})
	engineOf := func(before, after []int64) int {
		t.Helper()
		for i := range after {
			if after[i] > before[i] {
				return i
			}
		}
		t.Fatalf("no engine served the request: %v then %v", before, after)
		return -1
	}
	aRequests := func() []int64 {
		var out []int64
		for _, e := range liveNow().lifecycle.Statuses()[0].Engines {
			out = append(out, e.Requests)
		}
		return out
	}
	for i := range 6 {
		prompt := make([]int, 96)
		for k := range prompt {
			prompt[k] = 100 + (i*131+k*7)%1100
		}
		before := engineRequestsOf(t, bAdmin)
		routed := metricValue(t, "caddy_mlc_prefix_events_applied_total", "kind", "routed")
		if _, code, raw := b.complete(b.base, greedy(prompt, 2)); code != 200 {
			t.Fatalf("replica B: status %d: %s", code, raw)
		}
		at := engineOf(before, engineRequestsOf(t, bAdmin))
		deadline := time.Now().Add(10 * time.Second)
		for metricValue(t, "caddy_mlc_prefix_events_applied_total", "kind", "routed") <= routed {
			if time.Now().After(deadline) {
				t.Fatalf("prompt %d: replica A never learned that engine %d holds it", i, at)
			}
			time.Sleep(5 * time.Millisecond) // the events cross another process and Redis
		}
		// B's request ended: A's view of the engines' load must say so, or
		// the load it saw there may outweigh the prefix.
		answered := time.Now()
		waitFor(t, "replica A to see the engines idle", func() bool {
			for _, e := range liveNow().lifecycle.Statuses()[0].Engines {
				if e.Load == nil || !e.Load.At.After(answered) || e.Load.Running+e.Load.Waiting > 0 {
					return false
				}
			}
			return true
		})
		aBefore := aRequests()
		if _, code, raw := a.complete(a.base, greedy(append(prompt, 7, 8, 9), 2)); code != 200 {
			t.Fatalf("replica A: status %d: %s", code, raw)
		}
		if got := engineOf(aBefore, aRequests()); got != at {
			t.Fatalf("prompt %d: replica B sent it to engine %d, replica A its continuation to engine %d", i, at, got)
		}
	}
}
