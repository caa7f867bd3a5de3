package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Big prompts: concurrent 3 MB string prompts (inside max_body_size, far
// beyond the context) are refused with context_length_exceeded, each
// quickly, while normal clients keep being served; the memory they took
// is given back. The long form holds the goals: 20 prompts, each
// refused within 5 s, normal clients' worst wait for text under 1 s, RSS
// up by at most 150 MB at the peak.
func TestBigPrompts(t *testing.T) {
	r := newRig(t, rigConfig{endpoints: []string{"", ""}, routerOpts: "\t\tmode whole\n"})
	big := strings.Repeat("the cat sat on the mat and looked at the moon ", 3<<20/46)
	body, _ := json.Marshal(map[string]any{"prompt": big, "max_tokens": 8})
	base := rss(t)
	var peak rssPeak
	stopPeak := peak.watch(t)

	jobs := longJobs(4, 16)
	refs := r.references(jobs)
	var ta tally
	stop := make(chan struct{})
	wait := r.loop(2, jobs, refs, &ta, stop)

	n := pick(6, 20)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	var errs []string
	for range n {
		wg.Go(func() {
			begin := time.Now()
			resp, err := r.client.Post(r.base+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(begin)
			e := protocol.ParseError(resp.StatusCode, raw)
			mu.Lock()
			defer mu.Unlock()
			worst = max(worst, took)
			if resp.StatusCode != 400 || e == nil || e.Code == nil || *e.Code != protocol.CodeContextLengthExceeded || e.Param == nil || *e.Param != "prompt" {
				errs = append(errs, fmt.Sprintf("%d %.200s", resp.StatusCode, raw))
			}
		})
	}
	wg.Wait()
	close(stop)
	wait()
	stopPeak()
	fmt.Printf("chaos big-prompts: prompts=%d refused_worst=%v rss_base=%dMB rss_peak=+%dMB\n",
		n, worst.Round(time.Millisecond), base>>20, (peak.max-base)>>20)
	if len(errs) > 0 {
		t.Fatalf("%d of %d big prompts not refused as context_length_exceeded; first: %s", len(errs), n, errs[0])
	}
	if worst > pick(30*time.Second, 5*time.Second) {
		t.Errorf("a big prompt was refused after %v", worst)
	}
	if *long && peak.max-base > 150<<20 {
		t.Errorf("RSS grew by %d MB", (peak.max-base)>>20)
	}
	r.finish(&ta, "big-prompts-normal-clients", time.Second)
}

// rss returns this process's resident set size (Caddy runs in it).
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// rssPeak samples the RSS until stopped.
type rssPeak struct{ max int64 }

func (p *rssPeak) watch(t *testing.T) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			p.max = max(p.max, rss(t))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
