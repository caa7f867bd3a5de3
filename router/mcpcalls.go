package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/mcpclient"
)

// The hosted MCP tools' calls to their servers (mcp.go): the listing of
// each server's tools before the first round, the calls the input
// approves, and the calls of each round, each with a span of its own.

// jsonrpcInvalidParams is JSON-RPC's error code of a call that names no
// tool the server offers.
const jsonrpcInvalidParams = -32602

// beginHosted does the work before the first round: each server's tools
// listed, unless the conversation has them (an mcp_list_tools item of
// its label, as OpenAI reuses them), then the calls the input approves
// run. A server whose tools cannot be listed fails the request (a 424,
// as OpenAI's).
func (c *responseCall) beginHosted(ctx context.Context) *protocol.Error {
	h := c.hosted
	conv := append(slices.Clone(c.history), c.input...)
	for _, s := range h.servers {
		if list := lastList(conv, s.tool.ServerLabel); list != nil {
			s.tools = list.Tools
			continue
		}
		item, e := h.list(ctx, s)
		if e != nil {
			return e
		}
		h.pre = append(h.pre, item)
	}
	return c.runApproved(ctx, conv)
}

// lastList is the conversation's last list of the tools of the server
// labelled label; nil when it has none.
func lastList(conv []protocol.ResponseMessage, label string) *protocol.ResponseMessage {
	for i := len(conv) - 1; i >= 0; i-- {
		if m := &conv[i]; m.Type == protocol.ItemMCPListTools && m.ServerLabel == label && !present(m.Error) {
			return m
		}
	}
	return nil
}

// list lists s's tools, those its mcp tool allows: an mcp_list_tools
// item.
func (h *hostedTools) list(ctx context.Context, s *hostedServer) (protocol.ResponseMessage, *protocol.Error) {
	ctx, span := startSpan(ctx, "mcp.list_tools", attribute.String("mcp.server_label", s.tool.ServerLabel))
	begin := time.Now()
	tools, err := h.session(ctx, s).ListTools(ctx)
	endSpan(span, err)
	h.log.Debug("mcp list tools", zap.String("server_label", s.tool.ServerLabel), zap.Int("tools", len(tools)),
		zap.Duration("duration", time.Since(begin)), zap.Error(err))
	if err != nil {
		e := protocol.Errorf(http.StatusFailedDependency, "external_connector_error", "Error retrieving tool list from MCP server: '%s': %v", s.tool.ServerLabel, err).
			WithCode("mcp_list_tools_failed")
		e.Param = &s.tool.At
		return protocol.ResponseMessage{}, e
	}
	for _, t := range tools {
		info := mcpToolInfo(t.Name, t.Description, t.InputSchema, t.Annotations)
		if s.tool.Offers(info) {
			s.tools = append(s.tools, info)
		}
	}
	return protocol.ResponseMessage{ID: protocol.NewID("mcpl_"), Type: protocol.ItemMCPListTools, ServerLabel: s.tool.ServerLabel, Tools: s.tools}, nil
}

// mcpToolInfo is a listed tool as an mcp_list_tools item has it.
func mcpToolInfo(name, description string, schema, annotations any) protocol.MCPToolInfo {
	t := protocol.MCPToolInfo{Name: name}
	if description != "" {
		t.Description = &description
	}
	t.InputSchema, _ = json.Marshal(schema)
	if b, err := json.Marshal(annotations); err == nil && string(b) != "null" {
		t.Annotations = b
	}
	return t
}

// runApproved runs the calls the input approves (each
// mcp_approval_response with approve true whose request, in the
// conversation conv, has no mcp_call yet), as mcp_call items that name
// their approval request. A denied one is no call: the model reads the
// denial (protocol's Chat).
func (c *responseCall) runApproved(ctx context.Context, conv []protocol.ResponseMessage) *protocol.Error {
	h := c.hosted
	for _, m := range c.input {
		if m.Type != protocol.ItemMCPApprovalResponse || !m.Approve || slices.ContainsFunc(conv, func(o protocol.ResponseMessage) bool {
			return o.Type == protocol.ItemMCPCall && o.ApprovalRequestID == m.ApprovalRequestID
		}) {
			continue
		}
		i := slices.IndexFunc(conv, func(o protocol.ResponseMessage) bool {
			return o.Type == protocol.ItemMCPApprovalRequest && o.ID == m.ApprovalRequestID
		})
		if i < 0 {
			return protocol.InvalidRequest("input", "mcp_approval_response %s approves %q: there is no mcp_approval_request of that id in the conversation", m.ID, m.ApprovalRequestID).WithCode(protocol.CodeInvalidValue)
		}
		req := conv[i]
		s := h.server(req.ServerLabel)
		if s == nil {
			return protocol.InvalidRequest("tools", "mcp_approval_response %s approves a call of MCP server %q, which no mcp tool of the request names", m.ID, req.ServerLabel).WithCode(protocol.CodeInvalidValue)
		}
		item := protocol.NewMCPCall(protocol.NewID("mcp_"), req.ServerLabel, req.Name, req.Arguments, req.ID)
		if !slices.ContainsFunc(s.tools, func(t protocol.MCPToolInfo) bool { return t.Name == req.Name }) {
			item.Error, item.Status = protocol.MCPError(mcpclient.ProtocolError, jsonrpcInvalidParams, fmt.Sprintf("tool %q is not among the tools the request allows of this server", req.Name)), protocol.ResponseFailed
			h.pre = append(h.pre, item)
			continue
		}
		h.pre = append(h.pre, h.call(ctx, s, item))
	}
	return nil
}

// server is the server of label; nil when no mcp tool has it.
func (h *hostedTools) server(label string) *hostedServer {
	for _, s := range h.servers {
		if s.tool.ServerLabel == label {
			return s
		}
	}
	return nil
}

// run runs the calls of the round ended, in order, each ending its
// mcp_call item completed or failed.
func (h *hostedTools) run(ctx context.Context, out mcpSink) {
	pending := h.pending
	h.pending = nil
	for _, p := range pending {
		// A client gone shows in the next round.
		_ = out.hostedCallEnd(p.index, h.call(ctx, p.fn.server, p.item))
	}
}

// call runs the mcp_call item on s, within the call's timeout, and
// returns it with its output or its error.
func (h *hostedTools) call(ctx context.Context, s *hostedServer, item protocol.ResponseMessage) protocol.ResponseMessage {
	ctx, span := startSpan(ctx, "mcp.call", attribute.String("mcp.server_label", item.ServerLabel), attribute.String("mcp.tool", item.Name))
	begin := time.Now()
	res, err := h.session(ctx, s).Call(ctx, item.Name, json.RawMessage(item.Arguments))
	item.Status = protocol.ResponseCompleted
	var failed error
	switch me := (*mcpclient.Error)(nil); {
	case errors.As(err, &me):
		item.Error, item.Status, failed = protocol.MCPError(me.Type, me.Code, me.Message), protocol.ResponseFailed, me
	case err != nil:
		item.Error, item.Status, failed = protocol.MCPError(mcpclient.HTTPError, http.StatusBadGateway, err.Error()), protocol.ResponseFailed, err
	case res.IsError:
		item.Error, item.Status, failed = protocol.MCPToolExecutionError(res.Output), protocol.ResponseFailed, fmt.Errorf("the tool failed")
	default:
		item.Output = res.Output
	}
	endSpan(span, failed)
	h.log.Debug("mcp call", zap.String("server_label", item.ServerLabel), zap.String("tool", item.Name), zap.String("status", item.Status),
		zap.Int("output_bytes", len(res.Output)), zap.Duration("duration", time.Since(begin)), zap.Error(failed))
	return item
}
