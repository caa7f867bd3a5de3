package caddymlc

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A Caddy out of file descriptors (a low RLIMIT_NOFILE, filled with idle
// keep-alive clients, as an attacker would) answers a new client at once
// with a 503 in OpenAI's shape, over plain HTTP, HTTP/1.1 over TLS and
// HTTP/2; a TLS client of a listener whose wrapper sits before tls is
// closed at once; all of it counted and logged. Once the idle clients
// leave, requests are served again.
func TestDescriptorReserveAnswersWhatCannotBeAccepted(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc and ulimit")
	}
	ports := testnet.FreePorts(t, 4)
	admin, plain, secure, before := ports[0], ports[1], ports[2], ports[3]
	dir := t.TempDir()
	cf := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	skip_install_trust
	auto_https disable_redirects
	log {
		level DEBUG
	}
	servers {
		listener_wrappers {
			mlc_descriptor_reserve
		}
	}
	servers :%d {
		listener_wrappers {
			mlc_descriptor_reserve {
				timeout 2s
			}
			tls
		}
	}
}
http://127.0.0.1:%d {
	respond "ok"
}
https://127.0.0.1:%d, https://127.0.0.1:%d {
	tls internal
	respond "ok"
}
`, admin, filepath.Join(dir, "data"), before, plain, secure, before)
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(cf), 0o600); err != nil {
		t.Fatal(err)
	}
	const limit = 200
	exe, _ := os.Executable()
	var stderr lockedBuffer
	// ulimit in the shell lowers the hard limit too: Go raises the soft
	// limit to the hard one at start.
	child := exec.Command("sh", "-c", `ulimit -n `+strconv.Itoa(limit)+` && exec "$0" run --config "$1" --adapter caddyfile`, exe, file)
	child.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir, "HOME="+dir)
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
		if t.Failed() {
			t.Logf("the child's log:\n%s", stderr.String())
		}
	})
	plainBase := fmt.Sprintf("http://127.0.0.1:%d", plain)
	waitFor(t, "the child Caddy to serve", func() bool {
		resp, err := http.Get(plainBase)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	noH2 := &http.Transport{TLSClientConfig: insecureTLS.Clone(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	h2 := &http.Transport{TLSClientConfig: insecureTLS.Clone(), ForceAttemptHTTP2: true}
	for _, tr := range []*http.Transport{noH2, h2} {
		defer tr.CloseIdleConnections()
	}
	// TLS too: its certificate is issued after the start.
	waitFor(t, "the child Caddy to serve TLS", func() bool {
		resp, err := (&http.Client{Transport: h2, Timeout: 10 * time.Second}).Get(fmt.Sprintf("https://127.0.0.1:%d/", secure))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	h2.CloseIdleConnections()
	if got := openFileLimit(t, child.Process.Pid); got != limit {
		t.Fatalf("the child's limit is %d, want %d", got, limit)
	}

	start := time.Now()
	// Fill Caddy's descriptors with idle keep-alive clients, each served
	// once, until one is refused: the reserve at work.
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	refusedWhileFilling := false
	for range limit + 20 {
		c, status, err := keepAliveGet(fmt.Sprintf("127.0.0.1:%d", plain))
		if err != nil {
			t.Fatalf("filling, after %d idle clients: %v", len(idle), err)
		}
		if status == http.StatusServiceUnavailable {
			c.Close()
			refusedWhileFilling = true
			break
		}
		idle = append(idle, c)
	}
	if !refusedWhileFilling {
		t.Fatalf("%d idle clients and no 503: the limit did not apply", len(idle))
	}

	body := `{"prompt":"hello","max_tokens":4}`
	cases := []struct {
		name  string
		url   string
		tr    *http.Transport
		proto int
	}{
		{"plain", plainBase + protocol.PathCompletions, &http.Transport{}, 1},
		{"TLS, HTTP/1.1", fmt.Sprintf("https://127.0.0.1:%d%s", secure, protocol.PathCompletions), noH2, 1},
		{"TLS, HTTP/2", fmt.Sprintf("https://127.0.0.1:%d%s", secure, protocol.PathCompletions), h2, 2},
	}
	refusals := 1
	for _, c := range cases {
		// Several at once: each is answered in turn, none waits long.
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				begin := time.Now()
				cl := &http.Client{Transport: c.tr, Timeout: 20 * time.Second}
				resp, err := cl.Post(c.url, "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("%s: %v (after %v)", c.name, err, time.Since(begin))
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				took := time.Since(begin)
				var e protocol.ErrorBody
				switch {
				case resp.StatusCode != http.StatusServiceUnavailable || resp.ProtoMajor != c.proto:
					t.Errorf("%s: %s %s, want a 503 over HTTP/%d", c.name, resp.Proto, resp.Status, c.proto)
				case resp.Header.Get("Retry-After") != "2" || resp.Header.Get("Content-Type") != "application/json":
					t.Errorf("%s: headers %v", c.name, resp.Header)
				case json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Type != protocol.ErrTypeUnavailable ||
					e.Error.Code == nil || *e.Error.Code != "no_descriptors":
					t.Errorf("%s: body %s", c.name, raw)
				case c.proto == 1 && !resp.Close:
					t.Errorf("%s: the connection is kept open", c.name)
				case took > 3*time.Second:
					t.Errorf("%s: the 503 took %v", c.name, took)
				}
			})
		}
		wg.Wait()
		if c.proto == 1 {
			refusals += 5
		} else {
			refusals++ // a connection, which may have carried several
		}
	}
	// Before tls, a TLS client cannot be answered: it is closed at once.
	begin := time.Now()
	cl := &http.Client{Transport: noH2, Timeout: 20 * time.Second}
	if resp, err := cl.Get(fmt.Sprintf("https://127.0.0.1:%d/", before)); err == nil {
		resp.Body.Close()
		t.Errorf("a TLS client of the wrapper before tls: %s, want the connection closed", resp.Status)
	} else if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("a TLS client of the wrapper before tls waited %v: %v", took, err)
	}
	refusals++

	// The idle clients leave: service returns on its own.
	for _, c := range idle {
		c.Close()
	}
	idle = nil
	for _, c := range []struct {
		url string
		tr  *http.Transport
	}{{plainBase, &http.Transport{}}, {fmt.Sprintf("https://127.0.0.1:%d/", secure), h2}} {
		waitFor(t, "service to return on "+c.url, func() bool {
			resp, err := (&http.Client{Transport: c.tr, Timeout: 20 * time.Second}).Get(c.url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}

	if got := droppedNotAccepted(t, admin); got < float64(refusals) {
		t.Errorf(`clients_dropped_total{reason="not_accepted"} = %v, want at least %d`, got, refusals)
	}
	log := stderr.String()
	for _, want := range []string{"out of file descriptors: clients that cannot be accepted get 503", "file descriptors available again"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
	// Rate-limited: one Error line a second at most, per listener.
	if n := strings.Count(log, "out of file descriptors: clients"); n > 3*(1+int(time.Since(start)/time.Second)) {
		t.Errorf("%d Error lines about descriptors", n)
	}
}

// keepAliveGet opens a connection to addr, sends one GET, reads its
// answer and returns the connection open (an idle keep-alive client).
func keepAliveGet(addr string) (net.Conn, int, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, 0, err
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		c.Close()
		return nil, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return c, resp.StatusCode, nil
}

// openFileLimit reads a process's soft limit of open files.
func openFileLimit(t *testing.T, pid int) int {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Max open files\s+(\d+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no open files limit in %s", raw)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// droppedNotAccepted reads caddy_mlc_clients_dropped_total{reason="not_accepted"}
// from an admin endpoint's metrics.
func droppedNotAccepted(t *testing.T, adminPort int) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", adminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`caddy_mlc_clients_dropped_total\{reason="not_accepted"\} (\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no not_accepted count in the metrics:\n%s", raw)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// lockedBuffer is a buffer a child process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The wrapper's Caddyfile form.
func TestDescriptorReserveCaddyfile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"mlc_descriptor_reserve", 0, false},
		{"mlc_descriptor_reserve {\n timeout 3s\n}", 3 * time.Second, false},
		{"mlc_descriptor_reserve extra", 0, true},
		{"mlc_descriptor_reserve {\n timeout -1s\n}", 0, true},
		{"mlc_descriptor_reserve {\n timeout\n}", 0, true},
		{"mlc_descriptor_reserve {\n spare 3\n}", 0, true},
	} {
		var d DescriptorReserve
		err := d.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.in))
		if (err != nil) != c.err || time.Duration(d.Timeout) != c.want {
			t.Errorf("%q: timeout %v, error %v", c.in, time.Duration(d.Timeout), err)
		}
	}
}
