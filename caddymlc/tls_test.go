package caddymlc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A TLS site (tls internal) behind basic_auth serves a streaming
// completion; without credentials the router is never reached.
func TestTLSBasicAuthStreams(t *testing.T) {
	ports := freePorts(t, 4)
	// Password "sesame", hashed at bcrypt's lowest cost: at Caddy's default
	// (14) every check takes seconds under -race.
	// Its own storage: a fresh CA and certificate every run, as on a fresh
	// machine, where the first certificate comes after the config starts.
	cf := fmt.Sprintf(`{
	admin off
	skip_install_trust
	storage file_system %q
	http_port %d
	https_port %d
}
localhost:%d {
	tls internal
	basic_auth {
		demo $2a$04$dvzVyT10LRwJIYbsdAoIWuw/Xl/EQTfesockiASpn5/34tBlOIqvG
	}
	mlc_router {
		model tiny
		endpoint 127.0.0.1:%d
		endpoint 127.0.0.1:%d
	}
}
`, t.TempDir(), freePorts(t, 1)[0], ports[0], ports[0], ports[1], ports[2])
	loadCaddyfile(t, cf)
	waitForCertificate(t, fmt.Sprintf("localhost:%d", ports[0]))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS}}
	url := fmt.Sprintf("https://localhost:%d/v1/completions", ports[0])
	body := `{"prompt":"the secret garden","max_tokens":8,"temperature":0,"stream":true}`

	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: %d", resp.StatusCode)
	}

	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	req.SetBasicAuth("demo", "sesame")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d tls %v type %q", resp.StatusCode, resp.TLS != nil, resp.Header.Get("Content-Type"))
	}
	st, err := readStream(resp.Body, timeNow())
	if err != nil || !st.done || st.finish != "length" || st.chunks < 8 {
		t.Fatalf("stream: %v %+v", err, st)
	}
}

// waitForCertificate returns once a TLS handshake with addr succeeds. Caddy
// obtains the first certificate from its internal CA asynchronously, after
// the config has started; until then a handshake fails ("tls: internal
// error"), so a request sent at once races the issuance.
func waitForCertificate(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	dialer := &tls.Dialer{
		NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config:    &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"},
	}
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		conn, err := dialer.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate for %s within a minute: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // between handshakes, not instead of one
	}
}
