//go:build linux

package caddymlc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// SIGTERM to a Caddy (another process) with 16 streams in flight and a
// grace of 30 s: readiness answers 503 within 1 s, a new request is
// refused cleanly (503 with Retry-After) or served, every stream
// finishes with its exact text, Caddy exits 0 and no engine outlives it.
// Caddy stops its apps in no fixed order: shutdown_delay keeps the
// listener open whichever goes first, so readiness is asked, not refused.
func TestSIGTERMLetsStreamsFinish(t *testing.T) {
	ports := testnet.FreePorts(t, 4)
	admin, port := ports[0], ports[1]
	cf := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	grace_period 30s
	shutdown_delay 2s
	log {
		level ERROR
	}
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
		mode whole
		endpoint 127.0.0.1:%d
		endpoint 127.0.0.1:%d
		health_uri /healthz
	}
}
`, admin, port, ports[2], ports[3])
	file := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(file, []byte(cf), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	child := exec.Command(exe, "run", "--config", file, "--adapter", "caddyfile")
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = child.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-exited
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	s := &site{t: t, base: base, client: httpClient()}
	waitFor(t, "the child Caddy to be ready", func() bool { return healthz(base) == http.StatusOK })
	pids := enginePIDs(t, fmt.Sprintf("http://127.0.0.1:%d", admin))

	const streams, maxTokens = 16, 600
	prompt := func(i int) string { return fmt.Sprintf("the %d keepers of the winter light", i) }
	want := make([]string, streams)
	for i := range want {
		want[i] = reference(s, fmt.Sprintf("http://127.0.0.1:%d", ports[2+i%2]), greedy(prompt(i), maxTokens))
	}
	bodies := make([]map[string]any, streams)
	for i := range bodies {
		bodies[i] = greedy(prompt(i), maxTokens)
	}
	finish := s.exactStreams(base, bodies, want)
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	term := time.Now()
	for healthz(base) != http.StatusServiceUnavailable {
		if time.Since(term) > time.Second {
			t.Fatalf("readiness still %d a second after SIGTERM", healthz(base))
		}
		time.Sleep(10 * time.Millisecond) // another process's state, nothing to wait on
	}
	t.Logf("readiness 503 %v after SIGTERM", time.Since(term).Round(time.Millisecond))

	resp, err := s.client.Post(base+"/v1/completions", "application/json", strings.NewReader(mustJSON(greedy(prompt(0), 8))))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var answer protocol.CompletionResponse
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		t.Logf("a new request during the shutdown: %d %s", resp.StatusCode, raw)
	case resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &answer) != nil || len(answer.Choices) != 1 ||
		!strings.HasPrefix(want[0], answer.Choices[0].Text):
		t.Errorf("a new request during the shutdown: %d %v %s", resp.StatusCode, resp.Header, raw)
	}
	finish()
	select {
	case <-exited:
		if exitErr != nil {
			t.Errorf("Caddy exited: %v", exitErr)
		}
	case <-time.After(time.Minute):
		t.Fatal("Caddy did not exit")
	}
	t.Logf("Caddy exited %v after SIGTERM", time.Since(term).Round(time.Millisecond))
	for addr, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("engine %s (pid %d) outlived Caddy: %v", addr, pid, err)
		}
	}
}

// healthz is the status of the readiness path, 0 when it cannot be
// reached.
func healthz(base string) int {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
