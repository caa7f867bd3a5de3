// Package mcpclient calls the MCP servers that the Responses API's hosted
// MCP tools name ({"type": "mcp", "server_url": …}), over MCP's streamable
// HTTP transport with the official Go SDK. Only the servers the operator
// allows are called (Hosts.Resolve, before any connection): a server the
// configuration names, or a URL under one of its allowed prefixes, never
// an address a request makes up. Each operation (connecting and listing
// the tools, or one call) has a deadline, each answer a size bound, and
// nothing follows a redirect. Headers a request gives go to its server
// only, and are never logged.
package mcpclient

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/http/httpguts"
)

// Defaults of a Config.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 64 << 10
)

// Config is what the operator allows: the servers named by name, and the
// URL prefixes a request's server_url may start with.
type Config struct {
	Servers []Server
	// Allow are URL prefixes (scheme, host and a path): a server_url
	// under one is allowed.
	Allow []string
	// Timeout bounds each operation on a server: connecting and listing
	// its tools, or one call. Default DefaultTimeout.
	Timeout time.Duration
	// MaxOutput bounds a call's output, in bytes: a longer one is cut,
	// with a marker saying so. Default DefaultMaxOutput.
	MaxOutput int
}

// Server is an MCP server the configuration names: a request reaches it
// by its name (or its URL), and it gets Headers (its credentials) with
// every call.
type Server struct {
	Name    string
	URL     string
	Headers map[string]string
}

// Hosts is a checked Config: what requests may call, and how.
type Hosts struct {
	byName    map[string]Server
	byURL     map[string]Server
	allow     []*url.URL
	timeout   time.Duration
	maxOutput int
	client    *mcp.Client
	transport *http.Transport // shared by the sessions: connections are kept per server
}

// New checks cfg and returns the Hosts it allows.
func New(cfg Config) (*Hosts, error) {
	h := &Hosts{byName: map[string]Server{}, byURL: map[string]Server{}, timeout: cfg.Timeout, maxOutput: cfg.MaxOutput}
	if h.timeout <= 0 {
		h.timeout = DefaultTimeout
	}
	if h.maxOutput <= 0 {
		h.maxOutput = DefaultMaxOutput
	}
	for _, s := range cfg.Servers {
		u, err := serverURL(s.URL)
		switch {
		case s.Name == "" || strings.Contains(s.Name, "/"):
			return nil, fmt.Errorf("mcp_server %q: want a name without a slash", s.Name)
		case err != nil:
			return nil, fmt.Errorf("mcp_server %s: %w", s.Name, err)
		case h.byName[s.Name].Name != "":
			return nil, fmt.Errorf("mcp_server %s given twice", s.Name)
		}
		if err := checkHeaders(s.Headers); err != nil {
			return nil, fmt.Errorf("mcp_server %s: %w", s.Name, err)
		}
		s.URL = u.String()
		h.byName[s.Name], h.byURL[s.URL] = s, s
	}
	for _, p := range cfg.Allow {
		u, err := serverURL(p)
		if err != nil {
			return nil, fmt.Errorf("mcp_allow %q: %w", p, err)
		}
		h.allow = append(h.allow, u)
	}
	dialer := &net.Dialer{Timeout: h.timeout}
	h.transport = &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: dialer.DialContext, TLSHandshakeTimeout: h.timeout,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true}
	h.client = mcp.NewClient(&mcp.Implementation{Name: "caddy-mlc"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	return h, nil
}

// Close closes the connections kept idle.
func (h *Hosts) Close() { h.transport.CloseIdleConnections() }

// Timeout is the bound of each operation.
func (h *Hosts) Timeout() time.Duration { return h.timeout }

// Endpoint is an MCP server a request may call: its URL, and the headers
// it gets.
type Endpoint struct {
	URL    string
	header http.Header
}

// ErrNotAllowed is the error of a server the configuration does not
// allow.
var ErrNotAllowed = errors.New("not an MCP server this router may call: it calls the servers its configuration names (mcp_server) and URLs under its allowed prefixes (mcp_allow)")

// Resolve returns the server a request's MCP tool names: target is its
// server_url, a configured server's name or URL, or an http(s) URL under
// an allowed prefix; "" names the configured server called label.
// headers (the request's, and an authorization token as a bearer) go to
// that server with every call, after a configured server's own. Nothing
// is connected.
func (h *Hosts) Resolve(label, target string, headers map[string]string, authorization string) (Endpoint, error) {
	if err := checkHeaders(headers); err != nil {
		return Endpoint{}, err
	}
	if target == "" {
		target = label
	}
	s, named := h.byName[target]
	if !named {
		u, err := serverURL(target)
		if err != nil {
			return Endpoint{}, ErrNotAllowed
		}
		if s, named = h.byURL[u.String()]; !named {
			if !h.allowed(u) {
				return Endpoint{}, ErrNotAllowed
			}
			s = Server{URL: u.String()}
		}
	}
	ep := Endpoint{URL: s.URL, header: http.Header{}}
	for k, v := range headers {
		ep.header.Set(k, v)
	}
	if authorization != "" {
		ep.header.Set("Authorization", "Bearer "+authorization)
	}
	for k, v := range s.Headers {
		ep.header.Set(k, v)
	}
	return ep, nil
}

// allowed reports whether u is under one of the allowed prefixes: the
// same scheme and host (port included), and a path that is the prefix's
// or below it, segment by segment.
func (h *Hosts) allowed(u *url.URL) bool {
	for _, p := range h.allow {
		if u.Scheme != p.Scheme || !strings.EqualFold(u.Host, p.Host) {
			continue
		}
		prefix := strings.TrimSuffix(p.Path, "/")
		if u.Path == prefix || strings.HasPrefix(u.Path, prefix+"/") {
			return true
		}
	}
	return false
}

// serverURL parses an MCP server's URL: absolute http or https, a host,
// no user info or fragment, no dot segments (which a server could resolve
// out of an allowed prefix).
func serverURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: want an http or https URL", s)
	case u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("%q: want a URL with a host, and no user info nor fragment", s)
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, fmt.Errorf("%q: want a path without . or .. segments", s)
		}
	}
	u.Host = strings.ToLower(u.Host)
	return u, nil
}

// reservedHeaders are set by the transport: a request may not set them.
var reservedHeaders = []string{"Host", "Content-Length", "Content-Type", "Accept", "Connection", "Transfer-Encoding", "Upgrade",
	"Te", "Trailer", "Keep-Alive", "Proxy-Connection", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// checkHeaders checks headers' names and values.
func checkHeaders(headers map[string]string) error {
	for k, v := range headers {
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			return fmt.Errorf("header %q: not a header name", k)
		case !httpguts.ValidHeaderFieldValue(v):
			return fmt.Errorf("header %s: its value has a control character", k)
		}
		for _, r := range reservedHeaders {
			if strings.EqualFold(k, r) {
				return fmt.Errorf("header %s is the transport's: it may not be set", k)
			}
		}
	}
	return nil
}
