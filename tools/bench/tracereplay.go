package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// traceTimeout bounds one replayed request, whole, in wall time: a long
// prompt queued behind others on a fleet slowed by the time scale takes
// a while.
const traceTimeout = 15 * time.Minute

// traceSample is what one replayed request measured; its times are
// modelled (the wall clock's divided by the time scale).
type traceSample struct {
	req        *traceRequest
	late       time.Duration // sent after its time: the bench's own lag, wall
	ttft, tpot time.Duration
	end        time.Duration // its answer's end, since the replay began
	tokens     int           // generated, as the usage says
	cached     int           // prompt tokens the engines reused, as the usage says
	err        error
}

// replay sends every request of reqs at its time (the trace's, divided
// by the rate, times the scale) to the Caddys in turn, streamed, with the
// row's targets, and returns what each measured once all have ended. A
// request longer than the engines' context is left out (tooLong).
func replay(ctx context.Context, tc *traceConfig, caddys []*caddyProc, reqs []traceRequest) []traceSample {
	client := traceClient()
	defer client.CloseIdleConnections()
	vocab := promptWords()
	header := http.Header{}
	header.Set("X-SLO-TTFT-Ms", strconv.FormatInt(tc.scale.wall(tc.ttft).Milliseconds(), 10))
	header.Set("X-SLO-TPOT-Ms", strconv.FormatInt(tc.scale.wall(tc.tpot).Milliseconds(), 10))
	out := make([]traceSample, len(reqs))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range reqs {
		r := &reqs[i]
		s := &out[i]
		s.req = r
		if r.tooLong {
			continue
		}
		at := start.Add(tc.scale.wall(time.Duration(float64(r.at) / tc.rate)))
		if !sleepUntil(ctx, at) {
			s.err = ctx.Err()
			continue
		}
		s.late = time.Since(at)
		base := caddys[i%len(caddys)].base
		wg.Go(func() {
			defer goroutine.Recover(logger, "trace request", func(p any) { s.err = fmt.Errorf("panic: %v", p) })
			s.send(ctx, client, base, header, r.prompt(vocab), tc)
			s.end = time.Since(start)
		})
	}
	wg.Wait()
	for i := range out {
		out[i].end = tc.scale.modelled(out[i].end)
	}
	return out
}

// send streams one request and measures it.
func (s *traceSample) send(ctx context.Context, client *http.Client, base string, header http.Header, prompt []int, tc *traceConfig) {
	ctx, cancel := context.WithTimeout(ctx, traceTimeout)
	defer cancel()
	body := traceBody(prompt, s.req.out)
	resp, t0, err := postCompletion(ctx, client, base, body, header)
	if err != nil {
		s.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.err = answerError(resp)
		return
	}
	var first, last time.Time
	var usage *protocol.Usage
	_, err = readEvents(resp.Body, func(at time.Time, _ bool, _ time.Time, data []byte) {
		if u := usageOf(data); u != nil {
			usage = u
			return
		}
		if !bytes.Contains(data, []byte(`"text":"`)) || bytes.Contains(data, []byte(`"text":""`)) {
			return // no text: a keep-alive, the finish reason
		}
		if first.IsZero() {
			first = at
		}
		last = at
	})
	switch {
	case err != nil:
		s.err = err
		return
	case usage == nil:
		s.err = fmt.Errorf("a stream without its usage")
		return
	}
	s.tokens = usage.CompletionTokens
	if d := usage.PromptTokensDetails; d != nil {
		s.cached = d.CachedTokens
	}
	s.ttft = tc.scale.modelled(first.Sub(t0))
	if s.tokens > 1 {
		s.tpot = tc.scale.modelled(last.Sub(first)) / time.Duration(s.tokens-1)
	}
}

// traceBody is a streamed completion of prompt for exactly out tokens:
// the engines' generator never ends a text itself (--eos-every 0).
func traceBody(prompt []int, out int) []byte {
	b := make([]byte, 0, 16+len(prompt)*5)
	b = append(b, `{"model":"tiny","max_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"temperature":0,"stream":true,"stream_options":{"include_usage":true},"prompt":[`...)
	for i, id := range prompt {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, "]}"...)
}

// traceClient is the replay's HTTP client: a connection a request in
// flight, and no deadline on the answer's headers short of the request's
// (the router answers a stream once its first token comes).
func traceClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

// sleepUntil waits until t, reporting false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// timeScale is a timed fleet's -time-scale: how many times slower than
// real time it runs.
type timeScale float64

// wall is a modelled duration on the wall clock of the run.
func (k timeScale) wall(d time.Duration) time.Duration { return time.Duration(float64(d) * float64(k)) }

// modelled is a wall-clock duration of the run in modelled time.
func (k timeScale) modelled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / float64(k))
}
