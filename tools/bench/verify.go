package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// verify checks, before anything is measured, that every party gives the
// same greedy text as one engine straight, streamed and not: figures of a
// party that answers wrongly would mean nothing.
func verify(ctx context.Context, parties []*party, seed uint64, promptLen int) error {
	var ref *party
	for _, p := range parties {
		if p.key == keyDirect {
			ref = p
		}
	}
	for _, stream := range []bool{false, true} {
		r := row{conc: 1, stream: stream, maxTokens: 16}
		for i, body := range bodies(seed^0x5eed, r, 0, 3, promptLen) {
			want, err := ref.text(ctx, body, stream)
			if err != nil {
				return fmt.Errorf("verify: %s: %w", ref.label, err)
			}
			for _, p := range parties {
				got, err := p.text(ctx, body, stream)
				if err != nil {
					return fmt.Errorf("verify: %s: %w", p.label, err)
				}
				if got != want {
					return fmt.Errorf("verify: %s, prompt %d, stream %v: text %q, one engine gives %q", p.label, i, stream, got, want)
				}
			}
		}
	}
	return nil
}

// text returns the completion's text, streamed or not.
func (p *party) text(ctx context.Context, body []byte, stream bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, _, err := postCompletion(ctx, p.http, p.url(), body, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", answerError(resp)
	}
	if !stream {
		var out protocol.CompletionResponse
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
			return "", err
		}
		if len(out.Choices) != 1 {
			return "", fmt.Errorf("%d choices", len(out.Choices))
		}
		return out.Choices[0].Text, nil
	}
	var text strings.Builder
	events := protocol.NewSSEReader(resp.Body, 0)
	for {
		data, err := events.Next()
		if err != nil {
			return "", fmt.Errorf("stream: %w", err)
		}
		if protocol.IsDone(data) {
			return text.String(), nil
		}
		var chunk protocol.CompletionResponse
		if err := json.Unmarshal(data, &chunk); err != nil {
			return "", fmt.Errorf("chunk %.200q: %w", data, err)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Text)
		}
	}
}
