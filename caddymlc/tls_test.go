package caddymlc

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A TLS site (tls internal) behind basic_auth serves a streaming
// completion; without credentials the router is never reached.
func TestTLSBasicAuthStreams(t *testing.T) {
	ports := freePorts(t, 4)
	// Password "sesame" (caddy hash-password).
	cf := fmt.Sprintf(`{
	admin off
	skip_install_trust
	http_port %d
	https_port %d
}
localhost:%d {
	tls internal
	basic_auth {
		demo $2a$14$031GztT/uk.kya3fcQVe5.QUsQXSgW83bJhRC/5N8QI8IgeanXQ0m
	}
	mlc_router {
		model tiny
		endpoint 127.0.0.1:%d
		endpoint 127.0.0.1:%d
	}
}
`, freePorts(t, 1)[0], ports[0], ports[0], ports[1], ports[2])
	loadCaddyfile(t, cf)
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
