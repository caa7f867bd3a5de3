package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mcptest"
)

// Resolve allows a configured server (by name, by label, by URL, with
// its headers after the request's) and URLs under an allowed prefix, by
// scheme, host and whole path segments; nothing else.
func TestResolve(t *testing.T) {
	h, err := New(Config{Servers: []Server{{Name: "docs", URL: "https://Docs.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer cfg"}}},
		Allow: []string{"https://mcp.example.com/team", "http://10.0.0.7:8000/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		label, target string
		want          string // the URL; "" refused
	}{
		{"x", "docs", "https://docs.example.com/mcp"},
		{"docs", "", "https://docs.example.com/mcp"},
		{"x", "https://docs.example.com/mcp", "https://docs.example.com/mcp"},
		{"x", "https://mcp.example.com/team", "https://mcp.example.com/team"},
		{"x", "https://mcp.example.com/team/a/mcp?x=1", "https://mcp.example.com/team/a/mcp?x=1"},
		{"x", "http://10.0.0.7:8000/mcp", "http://10.0.0.7:8000/mcp"},
		{"x", "https://mcp.example.com/teamwork", ""},
		{"x", "https://mcp.example.com/team/../admin", ""},
		{"x", "https://mcp.example.com.evil.dev/team", ""},
		{"x", "http://mcp.example.com/team", ""},
		{"x", "https://user@mcp.example.com/team", ""},
		{"x", "http://10.0.0.7:8001/mcp", ""},
		{"x", "http://169.254.169.254/latest", ""},
		{"x", "file:///etc/passwd", ""},
		{"x", "wiki", ""},
		{"wiki", "", ""},
	} {
		ep, err := h.Resolve(tc.label, tc.target, nil, "")
		switch {
		case tc.want == "" && !errors.Is(err, ErrNotAllowed):
			t.Errorf("%s %q: %+v %v, want refused", tc.label, tc.target, ep, err)
		case tc.want != "" && (err != nil || ep.URL != tc.want):
			t.Errorf("%s %q: %+v %v, want %s", tc.label, tc.target, ep, err, tc.want)
		}
	}
	ep, _ := h.Resolve("x", "docs", map[string]string{"Authorization": "Bearer req", "X-Team": "ml"}, "")
	if ep.header.Get("Authorization") != "Bearer cfg" || ep.header.Get("X-Team") != "ml" {
		t.Errorf("a configured server's headers win: %v", ep.header)
	}
	ep, _ = h.Resolve("x", "http://10.0.0.7:8000/mcp", nil, "tok")
	if ep.header.Get("Authorization") != "Bearer tok" {
		t.Errorf("authorization: %v", ep.header)
	}
	if _, err := h.Resolve("x", "docs", map[string]string{"Host": "evil"}, ""); err == nil || errors.Is(err, ErrNotAllowed) {
		t.Errorf("a transport's header: %v", err)
	}
	for _, bad := range []Config{{Servers: []Server{{Name: "a", URL: "ftp://x"}}}, {Servers: []Server{{Name: "a/b", URL: "http://x"}}},
		{Servers: []Server{{Name: "a", URL: "http://x"}, {Name: "a", URL: "http://y"}}}, {Allow: []string{"x.example.com"}}} {
		if _, err := New(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// A session lists and calls within its bounds: the headers go to the
// server; a redirect is not followed (the server it points to gets
// nothing); an answer over the bound fails; an output over MaxOutput is
// cut with a marker; a server that does not answer fails in the timeout,
// an http_error 504.
func TestSession(t *testing.T) {
	srv := mcptest.Start(t)
	h, err := New(Config{Servers: []Server{{Name: "s", URL: srv.URL, Headers: map[string]string{"X-Key": "k"}}}, MaxOutput: 100, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	ep, _ := h.Resolve("s", "", nil, "")
	s := h.Open(ep)
	t.Cleanup(s.Close)
	ctx := t.Context()
	tools, err := s.ListTools(ctx)
	if err != nil || len(tools) != 5 {
		t.Fatalf("%d tools, %v", len(tools), err)
	}
	res, err := s.Call(ctx, "big", []byte(`{"bytes": 300}`))
	if err != nil || res.Output != strings.Repeat("x", 100)+"\n[output truncated: 100 of 300 bytes]" {
		t.Errorf("big: %q %v", res.Output, err)
	}
	if res, err := s.Call(ctx, "fail", []byte(`{}`)); err != nil || !res.IsError || res.Output != mcptest.Failed {
		t.Errorf("fail: %+v %v", res, err)
	}
	var me *Error
	if _, err := s.Call(ctx, "nothing", []byte(`{}`)); !errors.As(err, &me) || me.Type != ProtocolError {
		t.Errorf("an unknown tool: %v", err)
	}
	if _, err := s.Call(ctx, "slow", []byte(`{}`)); !errors.As(err, &me) || me.Type != HTTPError || me.Code != http.StatusGatewayTimeout {
		t.Errorf("slow: %v", err)
	}
	if got := srv.Header("X-Key"); len(got) != srv.Requests() {
		t.Errorf("X-Key went with %d of %d requests", len(got), srv.Requests())
	}

	target := mcptest.Start(t)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("y", 2<<20) + `"}}`))
	}))
	t.Cleanup(huge.Close)
	h2, _ := New(Config{Allow: []string{redirect.URL + "/", huge.URL + "/"}, Timeout: 2 * time.Second})
	for url, why := range map[string]string{redirect.URL + "/mcp": "redirect", huge.URL + "/mcp": "bound"} {
		ep, err := h2.Resolve("x", url, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		s := h2.Open(ep)
		if _, err := s.ListTools(context.Background()); !errors.As(err, &me) || !strings.Contains(me.Message, why) {
			t.Errorf("%s: %v, want an error of its %s", url, err, why)
		}
		s.Close()
	}
	if n := target.Requests(); n != 0 {
		t.Errorf("the redirect was followed: %d requests", n)
	}
}
