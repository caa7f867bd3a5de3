package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// postCompletion sends body to base's /v1/completions with header's
// fields and returns the answer, whatever its status, and when it was
// sent. The caller closes the answer's body.
func postCompletion(ctx context.Context, client *http.Client, base string, body []byte, header http.Header) (*http.Response, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return nil, time.Time{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	return resp, t0, err
}

// answerError is the error of an answer that is not 200: its status and
// the start of its body.
func answerError(resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
}

// usageOf is the usage an answer or a stream's event carries, nil when
// it carries none.
func usageOf(data []byte) *protocol.Usage {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return nil
	}
	var u struct {
		Usage *protocol.Usage `json:"usage"`
	}
	if json.Unmarshal(data, &u) != nil {
		return nil
	}
	return u.Usage
}

// streamTimes reads a completion stream to its end: when its first
// event came, when its last text did, and the completion tokens of the
// usage after it (an error when there is none).
func streamTimes(body io.Reader) (first, last time.Time, tokens int, err error) {
	tokens = -1
	_, err = readEvents(body, func(at time.Time, isFirst bool, _ time.Time, data []byte) {
		if isFirst {
			first = at
		}
		if u := usageOf(data); u != nil {
			tokens = u.CompletionTokens
			return // the usage comes after the last text
		}
		last = at
	})
	if err == nil && tokens < 0 {
		err = errors.New("a stream without its usage")
	}
	return first, last, tokens, err
}
