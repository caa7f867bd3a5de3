// Command prefixbench compares mlc_router's prefix_aware selection policy
// with least_loaded on a workload that shares prefixes: 16 system prompts
// of about 1,000 tokens, each followed by many short user turns, on three
// built-in engines whose KV cache is too small for any one of them to hold
// every prefix. It prints, per policy, the time to first token (p50,
// p99), the throughput and the engines' prefix-cache hit rate.
//
//	go run ./tools/prefixbench            # about 3 minutes
//	go run ./tools/prefixbench -quick     # about 1 minute
//	go run ./tools/prefixbench -replicas 3
//	go run ./tools/prefixbench -timing h100-llama3-8b   # on timed engines
//
// With -replicas N (N > 1) it runs N Caddy replicas with the same config
// in front of the same engines, the clients' requests spread over them in
// turn, sharing what they learn through a redis-server of its own (the
// mlc global option's cluster; redis-server must be on PATH); with
// -cluster=false they do not share, as without the option.
//
// Every process it starts (the engines, Caddy) is its own and is stopped
// when it ends, Ctrl-C included.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

var (
	caddyBin  = flag.String("caddy", "", "caddy binary with this module (default: go build ./xcaddy into a temporary directory)")
	quick     = flag.Bool("quick", false, "a short run")
	rounds    = flag.Int("rounds", 2, "rounds; each runs every policy once, on fresh engines")
	requests  = flag.Int("requests", 384, "requests per policy and round")
	clients   = flag.Int("concurrency", 8, "concurrent clients")
	prefixes  = flag.Int("prefixes", 16, "system prompts")
	prefixLen = flag.Int("prefix-tokens", 1000, "tokens per system prompt")
	kvTokens  = flag.Int("kv-tokens", 6144, "each engine's KV cache, in tokens (max_total_seq_length)")
	replicas  = flag.Int("replicas", 1, "Caddy replicas, requests spread over them in turn; more than 1 share through a redis-server of their own")
	share     = flag.Bool("cluster", true, "with -replicas above 1: share through Redis (false: each replica alone, as without the cluster option)")
	timed     = flag.String("timing", "", "run the engines timed with this profile (caddy mlc-engine --timing, e.g. h100-llama3-8b): a GPU's time instead of the CPU model's")
)

// procs are the processes this command started.
var procs struct {
	sync.Mutex
	list []*exec.Cmd
}

func main() {
	flag.Parse()
	if *quick {
		*rounds, *requests = 1, 160
	}
	if *replicas < 1 {
		fmt.Fprintln(os.Stderr, "prefixbench: -replicas must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer stopAll()
	if err := run(ctx); err != nil {
		stopAll()
		fmt.Fprintln(os.Stderr, "prefixbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	bin := *caddyBin
	if bin == "" {
		dir, err := os.MkdirTemp("", "prefixbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "caddy")
		fmt.Fprintln(os.Stderr, "building caddy ...")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./xcaddy")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./xcaddy (run from the repository root): %w", err)
		}
	}
	work := newWorkload()
	policies := []string{"least_loaded", "prefix_aware"}
	results := map[string][]result{}
	for r := range *rounds {
		for _, p := range policies {
			fmt.Fprintf(os.Stderr, "round %d, %s ...\n", r+1, p)
			res, err := runPolicy(ctx, bin, p, work)
			if err != nil {
				return err
			}
			results[p] = append(results[p], res)
		}
	}
	how := ""
	if *replicas > 1 && !*share {
		how = " (not sharing)"
	}
	engines := "3 engines"
	if *timed != "" {
		engines = "3 timed engines (" + *timed + ")"
	}
	fmt.Printf("\n%d system prompts of %d tokens, %d requests per run, %d clients, %s of %d KV tokens each, %d Caddy replica(s)%s, %d round(s), medians\n\n",
		*prefixes, *prefixLen, *requests, *clients, engines, *kvTokens, *replicas, how, *rounds)
	fmt.Println("| policy | TTFT p50 | TTFT p99 | requests/s | prefix-cache hit rate |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	med := map[string]result{}
	for _, p := range policies {
		med[p] = median(results[p])
		m := med[p]
		fmt.Printf("| %s | %.1f ms | %.1f ms | %.1f | %.0f%% |\n", p, ms(m.p50), ms(m.p99), m.rps, 100*m.hit)
	}
	a, b := med["prefix_aware"], med["least_loaded"]
	fmt.Printf("\nprefix_aware / least_loaded: TTFT p50 %.2fx, throughput %.2fx\n", float64(a.p50)/float64(b.p50), a.rps/b.rps)
	return nil
}

// workload is the requests of a run: system prompt and user turn ids.
type workload struct {
	system [][]int
	order  []int // system prompt of each request
	turns  [][]int
}

func newWorkload() *workload {
	rng := rand.New(rand.NewPCG(1, 2))
	w := &workload{}
	word := func() int { return 100 + rng.IntN(1100) } // ids of the tiny vocabulary's words (it has 1,276)
	for range *prefixes {
		p := make([]int, *prefixLen)
		for i := range p {
			p[i] = word()
		}
		w.system = append(w.system, p)
	}
	for range *requests {
		w.order = append(w.order, rng.IntN(*prefixes))
		t := make([]int, 16+rng.IntN(16))
		for i := range t {
			t[i] = word()
		}
		w.turns = append(w.turns, t)
	}
	return w
}

// result is one run's figures.
type result struct {
	p50, p99 time.Duration
	rps, hit float64
}

// runPolicy starts three fresh engines and the Caddy replicas with policy
// in front (and, for several, a fresh redis-server), sends the workload,
// and stops them.
func runPolicy(ctx context.Context, bin, policy string, w *workload) (result, error) {
	defer stopAll()
	n := *replicas
	ports, err := freePorts(3 + 2*n + 1)
	if err != nil {
		return result{}, err
	}
	var engines []string
	for _, p := range ports[:3] {
		addr := "127.0.0.1:" + strconv.Itoa(p)
		engines = append(engines, addr)
		args := []string{"mlc-engine", "tiny", "--enable-debug", "--mode", "server", "--prefix-cache-mode", "radix",
			"--overrides", "max_total_seq_length=" + strconv.Itoa(*kvTokens), "--host", "127.0.0.1", "--port", strconv.Itoa(p)}
		if *timed != "" {
			args = append(args, "--timing", *timed, "--eos-every", "0")
		}
		if err := start(ctx, bin, args...); err != nil {
			return result{}, err
		}
	}
	var cluster string
	shared := n > 1 && *share
	if shared {
		redisPort := ports[3+2*n]
		if err := startRedis(ctx, redisPort); err != nil {
			return result{}, err
		}
		cluster = fmt.Sprintf("\tmlc {\n\t\tcluster {\n\t\t\tredis 127.0.0.1:%d\n\t\t\treplicas %d\n\t\t}\n\t}\n", redisPort, n)
	}
	var apis, admins []string
	for k := range n {
		api := "http://127.0.0.1:" + strconv.Itoa(ports[3+2*k])
		admin := "127.0.0.1:" + strconv.Itoa(ports[4+2*k])
		apis, admins = append(apis, api), append(admins, admin)
		var cf strings.Builder
		cf.WriteString(fmt.Sprintf("{\n\tadmin %s\n\tauto_https off\n\tlog {\n\t\tlevel ERROR\n\t}\n%s}\n%s {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n\t\tpolicy %s\n",
			admin, cluster, api, policy))
		for _, e := range engines {
			cf.WriteString("\t\tendpoint " + e + " external\n")
		}
		cf.WriteString("\t}\n}\n")
		file, err := os.CreateTemp("", "prefixbench-*.Caddyfile")
		if err != nil {
			return result{}, err
		}
		defer os.Remove(file.Name())
		if _, err := file.WriteString(cf.String()); err != nil {
			return result{}, err
		}
		file.Close()
		if err := start(ctx, bin, "run", "--config", file.Name(), "--adapter", "caddyfile"); err != nil {
			return result{}, err
		}
	}
	for _, base := range append(slices.Clone(apis), prefixed(engines)...) {
		if err := waitUp(ctx, base); err != nil {
			return result{}, err
		}
	}
	if shared {
		for _, admin := range admins {
			if err := waitClusterUp(ctx, admin); err != nil {
				return result{}, err
			}
		}
	}
	// One request through each replica: its engines are ready.
	for _, api := range apis {
		if _, _, err := ask(ctx, api, []int{1, 2, 3}); err != nil {
			return result{}, err
		}
	}
	before, err := prefillTokens(ctx, engines)
	if err != nil {
		return result{}, err
	}
	var mu sync.Mutex
	var ttfts []time.Duration
	promptTokens := 0
	next := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	begin := time.Now()
	for range *clients {
		wg.Go(func() {
			for i := range next {
				prompt := append(slices.Clone(w.system[w.order[i]]), w.turns[i]...)
				ttft, n, err := ask(ctx, apis[i%len(apis)], prompt)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ttfts = append(ttfts, ttft)
				promptTokens += n
				mu.Unlock()
			}
		})
	}
	for i := range w.order {
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(begin)
	if firstErr != nil {
		return result{}, firstErr
	}
	after, err := prefillTokens(ctx, engines)
	if err != nil {
		return result{}, err
	}
	slices.Sort(ttfts)
	computed := after - before
	return result{
		p50: ttfts[len(ttfts)/2], p99: ttfts[len(ttfts)*99/100],
		rps: float64(len(ttfts)) / took.Seconds(),
		hit: 1 - float64(computed)/float64(promptTokens),
	}, nil
}

// ask streams a completion of prompt and returns the time to its first
// text and its prompt tokens.
func ask(ctx context.Context, api string, prompt []int) (time.Duration, int, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 8, "temperature": 0, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	begin := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var ttft time.Duration
	n := 0
	events := protocol.NewSSEReader(resp.Body, 0)
	defer events.Release()
	for {
		data, err := events.Next()
		if errors.Is(err, io.EOF) {
			return ttft, n, nil
		}
		if err != nil {
			return 0, 0, err
		}
		if protocol.IsDone(data) {
			continue
		}
		var chunk struct {
			Choices []struct{ Text string }
			Usage   *struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return 0, 0, fmt.Errorf("bad chunk %s", data)
		}
		if ttft == 0 && len(chunk.Choices) > 0 && chunk.Choices[0].Text != "" {
			ttft = time.Since(begin)
		}
		if chunk.Usage != nil {
			n = chunk.Usage.PromptTokens
		}
	}
}

// prefillTokens sums the prompt tokens the engines computed (the rest came
// from their prefix caches).
func prefillTokens(ctx context.Context, engines []string) (int, error) {
	total := 0
	for _, e := range engines {
		body := `{"prompt":[1],"max_tokens":1,"debug_config":{"special_request":"query_engine_metrics"}}`
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e+"/v1/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return 0, err
		}
		var out struct {
			Usage struct {
				Extra map[string]int `json:"extra"`
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		cancel()
		if err != nil {
			return 0, err
		}
		total += out.Usage.Extra["prefill_tokens"]
	}
	return total, nil
}

// start runs bin with args, as a process this command owns.
func start(ctx context.Context, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	procs.Lock()
	procs.list = append(procs.list, cmd)
	procs.Unlock()
	return ctx.Err()
}

// stopAll stops every process this command started.
func stopAll() {
	procs.Lock()
	defer procs.Unlock()
	for _, cmd := range procs.list {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, cmd := range procs.list {
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	procs.list = nil
}

// startRedis starts a redis-server of this command's own on port, with
// nothing kept on disk, and waits until it answers.
func startRedis(ctx context.Context, port int) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("-replicas needs redis-server (apt-get install redis-server): %w", err)
	}
	if err := start(ctx, bin, "--save", "", "--appendonly", "no", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--loglevel", "warning"); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	return pollUntil(ctx, 20*time.Second, func(ctx context.Context) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis-server on port %d did not come up: %w", port, err)
		}
		return nil
	})
}

// waitClusterUp waits until the Caddy behind an admin address shows
// caddy_mlc_cluster_up 1: it shares through Redis.
func waitClusterUp(ctx context.Context, admin string) error {
	return pollUntil(ctx, time.Minute, func(ctx context.Context) error {
		body, err := get(ctx, "http://"+admin+"/metrics")
		if err == nil && !strings.Contains(string(body), "\ncaddy_mlc_cluster_up 1\n") {
			err = errors.New("caddy_mlc_cluster_up is not 1")
		}
		if err != nil {
			return fmt.Errorf("the replica on %s never joined the cluster: %w", admin, err)
		}
		return nil
	})
}

// waitUp waits until base answers GET /v1/models.
func waitUp(ctx context.Context, base string) error {
	return pollUntil(ctx, time.Minute, func(ctx context.Context) error {
		if _, err := get(ctx, base+"/v1/models"); err != nil {
			return fmt.Errorf("%s did not come up: %w", base, err)
		}
		return nil
	})
}

// pollUntil calls try every 50 ms, each call bounded by 2 s, until it
// succeeds, and gives up with its last error after within.
func pollUntil(ctx context.Context, within time.Duration, try func(context.Context) error) error {
	deadline := time.Now().Add(within)
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := try(tctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// get fetches url and returns its body when it answers 200.
func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

func prefixed(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = "http://" + a
	}
	return out
}

func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return result{
		p50: time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99: time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
		rps: pick(func(r result) float64 { return r.rps }),
		hit: pick(func(r result) float64 { return r.hit }),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
