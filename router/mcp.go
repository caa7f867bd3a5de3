package router

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/mcpclient"
)

// Hosted MCP tools of the Responses API: a request's {"type": "mcp"}
// tools whose servers the configuration allows (package mcpclient checks
// each before any connection; another is a 400 naming the tool's
// server_url) are run by the router. Before the model's first round each
// server's tools are listed (an mcp_list_tools item), unless the
// conversation already has them, and the calls the input approves
// (mcp_approval_response) are run; each round offers the model the
// servers' tools beside the request's function tools; a call of one is an
// mcp_call item, run after the round (or an mcp_approval_request, when
// the tool needs the client's approval: the response then ends), its
// output the next round's tool turn; the answer goes on until the model
// answers text or calls a function tool, at most maxRounds rounds (the
// last offers no hosted tool). Every round is a request to the engines
// (rounds.go); every listing and call has a span of its own.

// DefaultMCPRounds bounds the rounds of the model one response runs.
const DefaultMCPRounds = 8

// HostMCP makes the Responses API run the mcp tools of requests whose
// servers hosts allows, each response at most maxRounds rounds of the
// model (under 2: DefaultMCPRounds). Without it (nil hosts, the default)
// mcp tools are left out, as other tools the fleet cannot run.
func (m *Models) HostMCP(hosts *mcpclient.Hosts, maxRounds int) {
	if maxRounds < 2 {
		maxRounds = DefaultMCPRounds
	}
	m.mcp, m.mcpRounds = hosts, maxRounds
}

// hostedTools is a Responses request's hosted MCP tools, over the rounds
// of its answer.
type hostedTools struct {
	hosts     *mcpclient.Hosts
	maxRounds int
	log       *zap.Logger
	servers   []*hostedServer // one per mcp tool, in the request's order
	// offered are the functions the round being generated offers, by
	// name.
	offered map[string]hostedFn
	rounds  int // of the model, begun
	// pre are the items of the work before the first round (lists,
	// approved calls), until the answer's sink has them.
	pre []protocol.ResponseMessage
	// pending are the calls of the round ended, to run; stop says the
	// response ends after them (the round asked the client something).
	pending []pendingCall
	stop    bool
	// roundStart is the output index of the round's first item; usage
	// that of the rounds ended.
	roundStart int
	usage      protocol.Usage
}

// hostedServer is one mcp tool's server.
type hostedServer struct {
	tool    protocol.MCPTool
	ep      mcpclient.Endpoint
	session *mcpclient.Session // nil until used
	tools   []protocol.MCPToolInfo
}

// hostedFn is a server's tool, offered as a function.
type hostedFn struct {
	server *hostedServer
	tool   protocol.MCPToolInfo
}

// pendingCall is an mcp_call item in progress, at its output index.
type pendingCall struct {
	index int
	fn    hostedFn
	item  protocol.ResponseMessage
}

// resolveHosted reads the request's mcp tools and the servers they name,
// when the router hosts them; one the configuration does not allow is a
// 400 naming its server_url (or server_label), before any connection.
func (c *responseCall) resolveHosted() *protocol.Error {
	if c.mcp == nil {
		return nil
	}
	tools, e := c.req.MCPTools()
	if e != nil || len(tools) == 0 {
		return e
	}
	h := &hostedTools{hosts: c.mcp, maxRounds: c.mcpRounds, log: c.log}
	for _, t := range tools {
		ep, err := c.mcp.Resolve(t.ServerLabel, t.ServerURL, t.Headers, t.Authorization)
		switch {
		case err != nil && !errors.Is(err, mcpclient.ErrNotAllowed):
			return protocol.InvalidRequest(t.At+".headers", "%s.headers: %v", t.At, err).WithCode(protocol.CodeInvalidValue)
		case err != nil && t.ServerURL == "":
			return protocol.InvalidRequest(t.At+".server_label", "%s.server_label %q names no server: %v", t.At, t.ServerLabel, err).WithCode(protocol.CodeInvalidValue)
		case err != nil:
			return protocol.InvalidRequest(t.At+".server_url", "%s.server_url %q: %v", t.At, t.ServerURL, err).WithCode(protocol.CodeInvalidValue)
		}
		h.servers = append(h.servers, &hostedServer{tool: t, ep: ep})
	}
	c.hosted, c.req.HostsMCP = h, true
	return nil
}

// session is s's session of this request, opened at its first use.
func (h *hostedTools) session(ctx context.Context, s *hostedServer) *mcpclient.Session {
	if s.session == nil {
		s.session = h.hosts.Open(s.ep)
		// Closed when the request ends, whichever way it ends.
		context.AfterFunc(ctx, s.session.Close)
	}
	return s.session
}

// next is the request of the answer's next round (api.next): before the
// first, once the hosted tools' work is done; after a round whose model
// called hosted tools, once the calls ran; nil when the answer is done.
func (c *responseCall) next(ctx context.Context, d *decoder) (*protocol.CompletionRequest, []int, *protocol.Error) {
	h := c.hosted
	switch {
	case h == nil:
		return nil, nil, nil
	case h.rounds == 0:
		if e := c.beginHosted(ctx); e != nil {
			return nil, nil, e
		}
	case len(h.pending) == 0:
		return nil, nil, nil // the answer ended with its round
	default:
		h.run(ctx, c.out)
		if h.stop {
			c.out.done(protocol.Usage{}) // the round's usage is counted: the response ends
			return nil, nil, nil
		}
	}
	return c.nextRound(d)
}

// nextRound is the request of the next round: the conversation with the
// answer's items so far, offered the hosted tools (none in the last
// round), with what max_output_tokens leaves of the response's output (a
// response that has none left ends, incomplete). A tool_choice applies
// to the first round only: the others choose freely whether to call
// again.
func (c *responseCall) nextRound(d *decoder) (*protocol.CompletionRequest, []int, *protocol.Error) {
	h := c.hosted
	r := c.req
	if m := c.req.MaxOutputTokens; m != nil && h.rounds > 0 {
		// max_output_tokens bounds the response, its rounds together.
		left := *m - h.usage.CompletionTokens
		if left <= 0 {
			c.out.finish(0, protocol.FinishLength)
			c.out.done(protocol.Usage{})
			return nil, nil, nil
		}
		r.MaxOutputTokens = &left
	}
	h.rounds++
	output := slices.Clone(h.pre)
	if c.out != nil {
		output = append(output, c.out.answer().items...)
	}
	h.roundStart = len(output)
	r.Hosted = h.offer(h.rounds == h.maxRounds)
	if h.rounds > 1 {
		r.ToolChoice = nil
	}
	creq, e := r.Chat(c.history, append(slices.Clone(c.input), output...))
	if e != nil {
		return nil, nil, e
	}
	return d.chatCompletion(creq)
}

// offer sets the functions the next round offers, and returns them: each
// server's tools its mcp tool allows; none in the last round, so that
// the model answers.
func (h *hostedTools) offer(last bool) []protocol.HostedFunction {
	h.offered = map[string]hostedFn{}
	if last {
		return nil
	}
	var fns []protocol.HostedFunction
	for _, s := range h.servers {
		for _, t := range s.tools {
			if s.tool.Offers(t) {
				fns = append(fns, protocol.HostedFunction{At: s.tool.At, Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
				h.offered[t.Name] = hostedFn{server: s, tool: t}
			}
		}
	}
	return fns
}

// hostedFn is the hosted tool the round offers as name; nil when none
// is.
func (c *responseCall) hostedFn(name string) *hostedFn {
	if c.hosted == nil {
		return nil
	}
	fn, ok := c.hosted.offered[name]
	if !ok {
		return nil
	}
	return &fn
}

// hostedCall writes the model's call of hosted tool fn: an
// mcp_approval_request when the tool needs the client's approval (the
// response then ends after this round), else an mcp_call in progress,
// which next runs after the round.
func (c *responseCall) hostedCall(out mcpSink, fn *hostedFn, arguments string) error {
	h, label := c.hosted, fn.server.tool.ServerLabel
	if fn.server.tool.NeedsApproval(fn.tool) {
		h.stop = true
		return out.hostedItem(protocol.ResponseMessage{ID: protocol.NewID("mcpr_"), Type: protocol.ItemMCPApprovalRequest,
			ServerLabel: label, Name: fn.tool.Name, Arguments: arguments})
	}
	item := protocol.NewMCPCall(protocol.NewID("mcp_"), label, fn.tool.Name, arguments, "")
	index, err := out.hostedCallStart(item)
	h.pending = append(h.pending, pendingCall{index: index, fn: *fn, item: item})
	return err
}

// holds reports whether the answer goes on after the round that ended
// with usage (counted into the response's): its model called hosted
// tools, whose calls next runs. A round that also called a function tool
// ends the response after them: the client has a call to answer.
func (c *responseCall) holds(a *responseAnswer, usage protocol.Usage) bool {
	h := c.hosted
	if h == nil {
		return false
	}
	h.usage = addUsage(h.usage, usage)
	if len(h.pending) == 0 {
		return false
	}
	if slices.ContainsFunc(a.items[min(h.roundStart, len(a.items)):], func(m protocol.ResponseMessage) bool { return m.Type == protocol.ItemFunctionCall }) {
		h.stop = true
	}
	return true
}

// usageOf is the response's usage, its last round's being usage.
func (c *responseCall) usageOf(usage protocol.Usage) protocol.Usage {
	if c.hosted == nil {
		return usage
	}
	return c.hosted.usage
}

// addUsage is a and b summed.
func addUsage(a, b protocol.Usage) protocol.Usage {
	cached := a.Cached() + b.Cached()
	sum := protocol.Usage{PromptTokens: a.PromptTokens + b.PromptTokens, CompletionTokens: a.CompletionTokens + b.CompletionTokens,
		TotalTokens: a.TotalTokens + b.TotalTokens}
	if a.PromptTokensDetails != nil || b.PromptTokensDetails != nil {
		sum = sum.WithCached(cached)
	}
	return sum
}

// present reports whether raw holds a value (not absent, not null).
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
