// Package mcptest is an MCP server for tests, made with the official Go
// SDK and served over its streamable HTTP transport by httptest: the
// tools the hosted-MCP tests call, and what it saw (the headers of each
// HTTP request, the calls).
package mcptest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools' words, which the tests' scripted replies match on.
const (
	// WeatherOf is get_weather's answer for a city.
	WeatherOf = "Sunny, 22 degrees in %s"
	// Failed is what fail says, as an error of the tool.
	Failed = "the service is down"
)

// Server is a running test MCP server. Its tools: get_weather {city}
// (WeatherOf), echo {text} (the text), big {bytes} (that many x's), slow
// (answers once its call is canceled: a server that hangs), fail (an
// error of the tool, Failed).
type Server struct {
	URL string

	mu      sync.Mutex
	headers []http.Header  // of every HTTP request
	calls   []string       // the tools called, in order
	methods map[string]int // the MCP requests got, by method
}

// Start starts a server for t's duration.
func Start(t testing.TB) *Server {
	s := &Server{methods: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptest"}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			s.mu.Lock()
			s.methods[method]++
			s.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	type city struct {
		City string `json:"city" jsonschema:"the city"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "get_weather", Description: "The weather of a city", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in city) (*mcp.CallToolResult, any, error) {
			s.called("get_weather")
			return text(fmt.Sprintf(WeatherOf, in.City)), nil, nil
		})
	type echo struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Says the text back"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echo) (*mcp.CallToolResult, any, error) {
			s.called("echo")
			return text(in.Text), nil, nil
		})
	type size struct {
		Bytes int `json:"bytes"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "A long answer"},
		func(_ context.Context, _ *mcp.CallToolRequest, in size) (*mcp.CallToolResult, any, error) {
			s.called("big")
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Takes its time"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.called("slow")
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails"},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.called("fail")
			r := text(Failed)
			r.IsError = true
			return r, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s.URL = ts.URL + "/mcp"
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (s *Server) called(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, tool)
}

// Calls are the tools called so far, in order.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// Method is the number of MCP requests of method (tools/list,
// tools/call, …) the server got.
func (s *Server) Method(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[method]
}

// Requests is the number of HTTP requests the server got.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.headers)
}

// Header is the values of header name the server got, one per request
// that had it.
func (s *Server) Header(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, h := range s.headers {
		if v := h.Get(name); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Hanging is a URL that accepts connections and never answers (until
// the request is canceled): a server that hangs before MCP does anything.
// It counts the requests it got.
func Hanging(t testing.TB) (url string, requests func() int) {
	var mu sync.Mutex
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		// The body read, the server sees the client leave.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}
