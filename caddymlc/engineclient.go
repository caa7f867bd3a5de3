package caddymlc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// maxEngineErrorBody bounds how much of an engine's error answer is read.
const maxEngineErrorBody = 64 << 10

// engineClient speaks the MLC serve API to engines.
type engineClient struct {
	http *http.Client
}

func newEngineClient() *engineClient {
	tr := &http.Transport{
		Proxy:               nil, // engines are reached directly, never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &engineClient{http: &http.Client{Transport: tr}}
}

// close drops idle connections.
func (c *engineClient) close() { c.http.CloseIdleConnections() }

// engineError is a failed call to an engine. retry says whether another
// attempt (possibly on another engine) may succeed; apiErr, when set, is the
// engine's own OpenAI error, passed to the client when no retry is made.
type engineError struct {
	op     string
	addr   string
	retry  bool
	apiErr *protocol.Error
	err    error
}

func (e *engineError) Error() string {
	if e.apiErr != nil {
		return fmt.Sprintf("%s on %s: %d %s", e.op, e.addr, e.apiErr.Status, e.apiErr.Message)
	}
	return fmt.Sprintf("%s on %s: %v", e.op, e.addr, e.err)
}

func (e *engineError) Unwrap() error { return e.err }

// retryable reports whether err allows another attempt.
func retryable(err error) bool {
	var ee *engineError
	if errors.As(err, &ee) {
		return ee.retry
	}
	return false
}

// post sends body as JSON to the engine and returns the response, checking
// its status.
func (c *engineClient) post(ctx context.Context, be *backend, path string, body any) (*http.Response, error) {
	op := strings.TrimPrefix(path, "/")
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, be.url+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &engineError{op: op, addr: be.addr, retry: ctx.Err() == nil, err: err}
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxEngineErrorBody))
	apiErr := protocol.ParseError(resp.StatusCode, raw)
	if apiErr == nil {
		apiErr = protocol.Errorf(resp.StatusCode, protocol.ErrTypeServer, "engine answered %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	// A 4xx is about the request and would fail anywhere; anything else
	// is the engine's trouble and another attempt may succeed.
	retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout
	return nil, &engineError{op: op, addr: be.addr, retry: retry, apiErr: apiErr, err: apiErr}
}

// call posts body and decodes a JSON answer into out.
func (c *engineClient) call(ctx context.Context, be *backend, path string, body, out any) error {
	resp, err := c.post(ctx, be, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxEngineErrorBody)).Decode(out); err != nil {
		return &engineError{op: strings.TrimPrefix(path, "/"), addr: be.addr, retry: ctx.Err() == nil, err: fmt.Errorf("decoding the answer: %w", err)}
	}
	return nil
}

// stream posts a streaming completion request and returns its chunks.
func (c *engineClient) stream(ctx context.Context, be *backend, path string, body any) (*chunkStream, error) {
	resp, err := c.post(ctx, be, path, body)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, &engineError{op: strings.TrimPrefix(path, "/"), addr: be.addr, retry: true, err: fmt.Errorf("answer is %q, not an event stream", ct)}
	}
	return &chunkStream{be: be, body: resp.Body, sse: protocol.NewSSEReader(resp.Body, 0)}, nil
}

// chunkStream reads the completion chunks of an engine's event stream.
type chunkStream struct {
	be   *backend
	body io.ReadCloser
	sse  *protocol.SSEReader
}

// next returns the next chunk, io.EOF after [DONE], or an engineError when
// the stream breaks or carries an error event.
func (s *chunkStream) next() (*protocol.CompletionResponse, error) {
	data, err := s.sse.Next()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // an engine always ends with [DONE]
		}
		return nil, &engineError{op: "stream", addr: s.be.addr, retry: true, err: err}
	}
	if protocol.IsDone(data) {
		return nil, io.EOF
	}
	if apiErr := protocol.ParseError(http.StatusBadGateway, data); apiErr != nil {
		return nil, &engineError{op: "stream", addr: s.be.addr, retry: true, apiErr: apiErr, err: apiErr}
	}
	var chunk protocol.CompletionResponse
	if err := json.Unmarshal(data, &chunk); err != nil {
		return nil, &engineError{op: "stream", addr: s.be.addr, retry: true, err: fmt.Errorf("bad chunk: %w", err)}
	}
	return &chunk, nil
}

// close ends the stream; closing the body cancels the engine's request.
func (s *chunkStream) close() { s.body.Close() }
