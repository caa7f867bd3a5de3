package mlccheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// maxAnswerBytes bounds what is read of an engine's answer.
const maxAnswerBytes = 16 << 20

// client speaks MLC's serve API to engines. Every call is bounded by its
// timeout, streams included.
type client struct {
	http    *http.Client
	timeout time.Duration
}

func newClient(timeout time.Duration) *client {
	tr := &http.Transport{
		Proxy:       nil, // engines are reached directly
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		// Below uvicorn's keep-alive timeout (5 s), which serves MLC's
		// engines: Go does not retry a POST on a connection the server
		// has just closed.
		IdleConnTimeout:    4 * time.Second,
		DisableCompression: true,
	}
	return &client{http: &http.Client{Transport: tr}, timeout: timeout}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// callError is a call that did not get a 200.
type callError struct {
	method, url string
	status      int             // 0: no answer
	api         *protocol.Error // the engine's error body, when it sent one
	err         error
}

func (e *callError) Error() string {
	switch {
	case e.api != nil:
		return fmt.Sprintf("%s %s: %d %s", e.method, e.url, e.status, e.api.Message)
	case e.status != 0:
		return fmt.Sprintf("%s %s: %d: %v", e.method, e.url, e.status, e.err)
	}
	return fmt.Sprintf("%s %s: %v", e.method, e.url, e.err)
}

func (e *callError) Unwrap() error { return e.err }

// statusOf returns the HTTP status of a failed call, 0 without one.
func statusOf(err error) int {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.status
	}
	return 0
}

// apiErrorOf returns the engine's error body of a failed call, or nil.
func apiErrorOf(err error) *protocol.Error {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.api
	}
	return nil
}

// do makes one call and returns the body of a 200.
func (c *client) do(ctx context.Context, method, url string, body any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.send(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, &callError{method: method, url: url, status: resp.StatusCode, err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, answerError(method, url, resp.StatusCode, b)
	}
	return b, nil
}

// send starts a call; the caller closes the answer's body.
func (c *client) send(ctx context.Context, method, url string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &callError{method: method, url: url, err: err}
	}
	return resp, nil
}

func answerError(method, url string, status int, b []byte) error {
	e := &callError{method: method, url: url, status: status, api: protocol.ParseError(status, b)}
	if e.api == nil {
		e.err = fmt.Errorf("%s", bytes.TrimSpace(b[:min(len(b), 300)]))
	}
	return e
}

// getJSON decodes the answer of a GET into out.
func (c *client) getJSON(ctx context.Context, url string, out any) error {
	b, err := c.do(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("GET %s: %w: %.300s", url, err, b)
	}
	return nil
}

// postJSON posts body and decodes the answer into out (nil: ignored).
func (c *client) postJSON(ctx context.Context, url string, body, out any) error {
	b, err := c.do(ctx, http.MethodPost, url, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("POST %s: %w: %.300s", url, err, b)
	}
	return nil
}

// answer is the text and finish reason of a completion's first choice.
type answer struct {
	text   string
	finish string
	usage  *protocol.Usage
}

// complete posts a whole (not streamed) completion to path.
func (c *client) complete(ctx context.Context, url string, req any) (answer, error) {
	var resp protocol.CompletionResponse
	if err := c.postJSON(ctx, url, req, &resp); err != nil {
		return answer{}, err
	}
	if len(resp.Choices) == 0 {
		return answer{}, fmt.Errorf("POST %s: an answer without choices", url)
	}
	ch := resp.Choices[0]
	return answer{text: ch.Text, finish: ch.Finished(), usage: resp.Usage}, nil
}

// stream posts a streamed completion and reads it to its end, which must
// be a finish reason and then [DONE].
func (c *client) stream(ctx context.Context, url string, req any) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.send(ctx, http.MethodPost, url, req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
		return answer{}, answerError(http.MethodPost, url, resp.StatusCode, b)
	}
	var a answer
	sse := protocol.NewSSEReader(resp.Body, 0)
	for {
		data, err := sse.Next()
		if err == io.EOF {
			return a, fmt.Errorf("POST %s: the stream ended without [DONE]", url)
		}
		if err != nil {
			return a, fmt.Errorf("POST %s: reading the stream: %w", url, err)
		}
		if protocol.IsDone(data) {
			if a.finish == "" {
				return a, fmt.Errorf("POST %s: the stream ended without a finish reason", url)
			}
			return a, nil
		}
		if e := protocol.ParseError(http.StatusOK, data); e != nil {
			return a, fmt.Errorf("POST %s: error event: %s", url, e.Message)
		}
		var chunk protocol.CompletionResponse
		if err := json.Unmarshal(data, &chunk); err != nil {
			return a, fmt.Errorf("POST %s: malformed event: %w: %.300s", url, err, data)
		}
		if chunk.Usage != nil {
			a.usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			a.text += ch.Text
			if r := ch.Finished(); r != "" {
				a.finish = r
			}
		}
	}
}
