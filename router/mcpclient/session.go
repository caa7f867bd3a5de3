package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTools bounds the tools listed of one server: more are not offered.
const maxTools = 256

// Session is one request's connection to one MCP server: connected at
// its first operation, each operation within the Hosts' timeout; Close
// ends it, at any time (an operation in progress then fails). Its
// operations are called one at a time.
type Session struct {
	h  *Hosts
	ep Endpoint
	tr *transport

	mu     sync.Mutex
	cs     *mcp.ClientSession
	closed bool
}

// Open returns a session with ep, not connected yet.
func (h *Hosts) Open(ep Endpoint) *Session {
	return &Session{h: h, ep: ep, tr: &transport{base: h.transport, header: ep.header, limit: h.bodyLimit()}}
}

// bodyLimit bounds one answer of a server (a JSON-RPC message, or one
// event of a stream): room for a call's output at its bound, escaped, and
// its framing.
func (h *Hosts) bodyLimit() int64 { return int64(max(4*h.maxOutput, 1<<20)) }

// connect connects the session within ctx, unless it is.
func (s *Session) connect(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	cs, closed := s.cs, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, errors.New("the session is closed")
	case cs != nil:
		return cs, nil
	}
	client := &http.Client{Transport: s.tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errors.New("the MCP server answered a redirect, which is not followed")
	}}
	t := &mcp.StreamableClientTransport{Endpoint: s.ep.URL, HTTPClient: client, MaxRetries: -1, DisableStandaloneSSE: true,
		MaxEventSize: int(s.h.bodyLimit())}
	cs, err := s.h.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // closed while it connected
		_ = cs.Close()
		return nil, errors.New("the session is closed")
	}
	s.cs = cs
	return cs, nil
}

// ListTools connects if need be and lists the server's tools (at most
// maxTools), within the timeout.
func (s *Session) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	op, cancel := context.WithTimeout(ctx, s.h.timeout)
	defer cancel()
	s.tr.status.Store(0)
	cs, err := s.connect(op)
	if err != nil {
		return nil, s.failure(ctx, op, err)
	}
	var tools []*mcp.Tool
	for t, err := range cs.Tools(op, nil) {
		if err != nil {
			return nil, s.failure(ctx, op, err)
		}
		if len(tools) == maxTools {
			break
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// Result is what a call returned: its output as text (the text parts
// joined, other parts as their JSON), cut at the Hosts' MaxOutput with a
// marker. IsError says the tool reported an error, Output its words.
type Result struct {
	Output  string
	IsError bool
}

// Call connects if need be and calls tool name with arguments (a JSON
// object's text), within the timeout.
func (s *Session) Call(ctx context.Context, name string, arguments json.RawMessage) (Result, error) {
	op, cancel := context.WithTimeout(ctx, s.h.timeout)
	defer cancel()
	s.tr.status.Store(0)
	cs, err := s.connect(op)
	if err != nil {
		return Result{}, s.failure(ctx, op, err)
	}
	res, err := cs.CallTool(op, &mcp.CallToolParams{Name: name, Arguments: arguments})
	if err != nil {
		return Result{}, s.failure(ctx, op, err)
	}
	return Result{Output: bound(outputText(res), s.h.maxOutput), IsError: res.IsError}, nil
}

// Close ends the session, telling the server (within the SDK's own
// bound on it).
func (s *Session) Close() {
	s.mu.Lock()
	cs := s.cs
	s.closed = true
	s.mu.Unlock()
	if cs != nil {
		_ = cs.Close()
	}
}

// outputText is a call's result as text.
func outputText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
			continue
		}
		b, _ := json.Marshal(c)
		parts = append(parts, string(b))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	return strings.Join(parts, "\n")
}

// bound cuts s at n bytes (between runes), with a marker that says so.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d of %d bytes]", cut, len(s))
}

// Error is an operation that failed, as the Responses API's mcp_call
// error reports it: Type "http_error" (Code an HTTP status: the server's,
// 504 when it did not answer in time, 502 when it could not be reached or
// answered what is not MCP) or "mcp_protocol_error" (Code the JSON-RPC
// error's).
type Error struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// The types of an Error.
const (
	HTTPError     = "http_error"
	ProtocolError = "mcp_protocol_error"
)

// rejectedByTransport is the code of the SDK's JSON-RPC error that wraps
// a failure of its own side (the request not sent, or its answer not
// read): not the server's protocol error.
const rejectedByTransport = -32005

// failure is err, of an operation under op (within ctx), as an *Error.
func (s *Session) failure(ctx, op context.Context, err error) *Error {
	var wire *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return &Error{Type: HTTPError, Code: 499, Message: "the request ended before the MCP server answered"}
	case op.Err() != nil:
		return &Error{Type: HTTPError, Code: http.StatusGatewayTimeout, Message: fmt.Sprintf("the MCP server did not answer within %s", s.h.timeout)}
	case errors.As(err, &wire) && wire.Code != rejectedByTransport:
		return &Error{Type: ProtocolError, Code: int(wire.Code), Message: wire.Message}
	}
	switch status := int(s.tr.status.Load()); {
	case status >= 300 && status < 400:
		return &Error{Type: HTTPError, Code: status, Message: fmt.Sprintf("the MCP server answered a redirect (%d), which is not followed", status)}
	case status != 0:
		return &Error{Type: HTTPError, Code: status, Message: fmt.Sprintf("the MCP server answered %d %s", status, http.StatusText(status))}
	}
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // without the URL, whose query may hold a credential
	}
	return &Error{Type: HTTPError, Code: http.StatusBadGateway, Message: fmt.Sprintf("the MCP server failed: %v", err)}
}
