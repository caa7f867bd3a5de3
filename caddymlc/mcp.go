package caddymlc

import (
	"fmt"
	"math"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddy-mlc/caddy-mlc/router/mcpclient"
)

// MCP says which MCP servers the Responses API's hosted MCP tools
// ({"type": "mcp", "server_url": …} in a request's tools) may call. The
// router calls no server the configuration does not allow: a request
// names a server configured here (by its name, as server_url or as the
// server_label of a tool without one, or by its URL) or a URL under an
// allowed prefix; any other is a 400 naming the tool's server_url, before
// any connection. Without any server or prefix, mcp tools are left out of
// the prompt, as the other tools the fleet cannot run. Every model of the
// handler shares the servers.
//
// Caddyfile:
//
//	mcp_server     <name> <url> [header <name> <value>]...   (repeatable)
//	mcp_allow      <url prefix>...                            (repeatable)
//	mcp_timeout    <duration>  (each listing of tools and each call; default 30s)
//	mcp_max_output <size>      (a call's output, cut beyond with a marker; default 64KiB)
//	mcp_max_rounds <n>         (rounds of the model one response runs; default 8)
type MCP struct {
	// MCPServers are the MCP servers requests may name. A server's
	// headers (its credentials) go with every request to it, and to no
	// other server; their values may hold Caddy's {env.*} placeholders.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`

	// MCPAllow are URL prefixes (scheme, host and port, path) under which
	// a request may name any server by its URL: one with the same scheme
	// and host, whose path is the prefix's or below it. Such a server
	// gets only the headers the request gives it.
	MCPAllow []string `json:"mcp_allow,omitempty"`

	// MCPTimeout bounds each operation on a server: connecting and
	// listing its tools, or one call. A listing that runs out fails the
	// request (424); a call that does, its mcp_call (an http_error 504),
	// which the model reads. Default 30s.
	MCPTimeout caddy.Duration `json:"mcp_timeout,omitempty"`

	// MCPMaxOutput bounds a call's output, in bytes: a longer one is cut,
	// and a marker says so ("[output truncated: N of M bytes]"). A
	// server's answer of more than four times it (at least 1 MiB) fails
	// the call. Default 64 KiB.
	MCPMaxOutput int64 `json:"mcp_max_output,omitempty"`

	// MCPMaxRounds bounds the rounds of the model one response runs
	// (each a request to the engines): the last one offers no hosted
	// tool, so that the model answers. At least 2; default 8.
	MCPMaxRounds int `json:"mcp_max_rounds,omitempty"`

	hosts *mcpclient.Hosts // provisioned
}

// MCPServer is an MCP server requests may name.
type MCPServer struct {
	// Name is what requests call it (a tool's server_url, or its
	// server_label).
	Name string `json:"name"`
	// URL is its streamable HTTP endpoint.
	URL string `json:"url"`
	// Headers go with every request to it.
	Headers map[string]string `json:"headers,omitempty"`
}

// provisionMCP checks the servers and prefixes and gives them to the
// front; with none, mcp tools are left out.
func (h *Handler) provisionMCP() error {
	c := h.MCP
	if len(c.MCPServers) == 0 && len(c.MCPAllow) == 0 {
		return nil
	}
	if c.MCPTimeout < 0 || c.MCPMaxOutput < 0 || c.MCPMaxOutput > math.MaxInt32 || c.MCPMaxRounds == 1 || c.MCPMaxRounds < 0 {
		return fmt.Errorf("mlc_router: mcp_timeout and mcp_max_output must be positive (the size under 2 GiB), mcp_max_rounds at least 2")
	}
	repl := caddy.NewReplacer()
	cfg := mcpclient.Config{Allow: c.MCPAllow, Timeout: time.Duration(c.MCPTimeout), MaxOutput: int(c.MCPMaxOutput)}
	for _, s := range c.MCPServers {
		headers := map[string]string{}
		for k, v := range s.Headers {
			headers[k] = repl.ReplaceKnown(v, "")
		}
		cfg.Servers = append(cfg.Servers, mcpclient.Server{Name: s.Name, URL: s.URL, Headers: headers})
	}
	hosts, err := mcpclient.New(cfg)
	if err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	h.MCP.hosts = hosts
	h.front.HostMCP(hosts, c.MCPMaxRounds)
	return nil
}

// close closes the servers' idle connections.
func (c *MCP) close() {
	if c.hosts != nil {
		c.hosts.Close()
	}
}

// parse reads one mcp_* line of the Caddyfile; seen holds the options
// already given.
func (c *MCP) parse(d *caddyfile.Dispenser, seen map[string]bool) error {
	switch name := d.Val(); name {
	case "mcp_server":
		return c.parseServer(d)
	case "mcp_allow":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("mcp_allow: want one or more URL prefixes")
		}
		c.MCPAllow = append(c.MCPAllow, args...)
		return nil
	case "mcp_timeout":
		if seen[name] {
			return d.Errf("%s given twice", name)
		}
		seen[name] = true
		return durationArg(d, name, &c.MCPTimeout)
	case "mcp_max_rounds":
		if seen[name] {
			return d.Errf("%s given twice", name)
		}
		seen[name] = true
		if err := countArg(d, name, &c.MCPMaxRounds, false); err != nil {
			return err
		}
		if c.MCPMaxRounds < 2 {
			return d.Errf("mcp_max_rounds %d: want at least 2 (the last round offers no hosted tool)", c.MCPMaxRounds)
		}
		return nil
	}
	var s string
	if err := onceArg(d, seen, &s); err != nil {
		return err
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n < 1 || n > math.MaxInt32 {
		return d.Errf("mcp_max_output %q: want a size such as 64KiB (under 2GiB)", s)
	}
	c.MCPMaxOutput = int64(n)
	return nil
}

// parseServer reads `mcp_server <name> <url> [header <name> <value>]...`.
func (c *MCP) parseServer(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) < 2 || len(args)%3 != 2 {
		return d.Errf("mcp_server: want <name> <url> [header <name> <value>]...")
	}
	s := MCPServer{Name: args[0], URL: args[1]}
	for rest := args[2:]; len(rest) > 0; rest = rest[3:] {
		if rest[0] != "header" {
			return d.Errf("mcp_server %s: want header <name> <value> after the URL, not %q", s.Name, rest[0])
		}
		setKey(&s.Headers, rest[1], rest[2])
	}
	c.MCPServers = append(c.MCPServers, s)
	return nil
}
