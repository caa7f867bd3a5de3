package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// sample is what one request measured.
type sample struct {
	latency time.Duration   // request sent to response ended
	ttft    time.Duration   // to the first event (streamed only)
	gaps    []time.Duration // between events (streamed only)
	err     error
}

// completionBody is the request every party gets: token ids, greedy.
type completionBody struct {
	Model       string  `json:"model"`
	Prompt      []int   `json:"prompt"`
	MaxTokens   int     `json:"max_tokens"`
	Temperature float64 `json:"temperature"`
	Stream      bool    `json:"stream"`
}

// bodies returns n request bodies of random prompts, the same for every
// party of a row and round (the seed says which), encoded before the
// clock starts.
func bodies(seed uint64, r row, round, n, promptLen int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, uint64(r.conc)<<32|uint64(r.maxTokens)<<8|uint64(round)))
	words := promptWords()
	out := make([][]byte, n)
	for i := range out {
		ids := make([]int, promptLen)
		for j := range ids {
			ids[j] = words[rng.IntN(len(words))]
		}
		out[i], _ = json.Marshal(completionBody{Model: "tiny", Prompt: ids, MaxTokens: r.maxTokens, Stream: r.stream})
	}
	return out
}

// promptWords are the token ids a prompt draws from: those the model may
// generate, EOS aside.
func promptWords() []int {
	tok := tiny.New()
	var ids []int
	for id := range tok.VocabSize() {
		if tok.Generatable(id) && id != tiny.EOS {
			ids = append(ids, id)
		}
	}
	return ids
}

// segment sends every body through the party with r.conc clients at once
// and returns what each request measured and the wall time of all.
func (p *party) segment(ctx context.Context, r row, reqs [][]byte) ([]sample, time.Duration) {
	out := make([]sample, len(reqs))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(r.conc, len(reqs)) {
		wg.Go(func() {
			defer goroutine.Recover(logger, "load client", nil)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) || ctx.Err() != nil {
					return
				}
				out[i] = p.do(ctx, reqs[i], r.stream)
			}
		})
	}
	wg.Wait()
	return out, time.Since(start)
}

// do sends one completion and measures it. The response is checked
// lightly (status, a choice, the end of the stream) so that the client's
// own work stays small next to the router's; exactness is checked once,
// before the rounds (see verify).
func (p *party) do(ctx context.Context, body []byte, stream bool) sample {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, t0, err := postCompletion(ctx, p.http, p.url(), body, nil)
	if err != nil {
		return sample{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{err: answerError(resp)}
	}
	if !stream {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err == nil && !bytes.Contains(b, []byte(`"choices":[{`)) {
			err = fmt.Errorf("no choice in %.200q", b)
		}
		return sample{latency: time.Since(t0), err: err}
	}
	s := sample{gaps: make([]time.Duration, 0, 80)}
	last, err := readEvents(resp.Body, func(at time.Time, first bool, prev time.Time, _ []byte) {
		if first {
			s.ttft = at.Sub(t0)
		} else {
			s.gaps = append(s.gaps, at.Sub(prev))
		}
	})
	s.latency, s.err = last.Sub(t0), err
	return s
}

// errNoDone is a stream that ended without its [DONE] event.
var errNoDone = errors.New("stream ended without data: [DONE]")

// readEvents reads a completion stream and calls onEvent at each data
// event but the last ([DONE]), with the event before's time and the
// event's data (valid until onEvent returns). It returns the time of
// [DONE]. An error event ends the stream with its text.
func readEvents(body io.Reader, onEvent func(at time.Time, first bool, prev time.Time, data []byte)) (time.Time, error) {
	events := protocol.NewSSEReader(body, 0)
	defer events.Release()
	var prev time.Time
	first := true
	for {
		data, err := events.Next()
		now := time.Now()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = errNoDone
			}
			return now, err
		}
		switch {
		case protocol.IsDone(data):
			return now, nil
		case bytes.HasPrefix(data, []byte(`{"error"`)):
			return now, fmt.Errorf("error event: %.300s", data)
		}
		onEvent(now, first, prev, data)
		first, prev = false, now
	}
}
