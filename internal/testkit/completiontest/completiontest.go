// Package completiontest has the completion clients that the tests of
// the router and of the engines' lifecycle share: greedy requests whose
// text is the oracle, read whole or streamed, many at once.
package completiontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Greedy is a greedy completion request of prompt.
func Greedy(prompt any, maxTokens int) map[string]any {
	return map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0}
}

// Tale is the prompt of stream i: distinct prompts, of the same length.
func Tale(i int) string {
	return fmt.Sprintf("tale %d of the %s harbour and the ships that never came back", i,
		[]string{"north", "grey", "windy", "silent"}[i%4])
}

// Text posts a whole completion to url and returns its text.
func Text(url string, body map[string]any) (string, error) {
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out protocol.CompletionResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
		return "", fmt.Errorf("%s: status %d, %v", url, resp.StatusCode, err)
	}
	return out.Choices[0].Text, nil
}

// References asks the engine (or router) at url, n requests at once, for
// the greedy text of each Tale.
func References(tb testing.TB, url string, n, maxTokens int) []string {
	tb.Helper()
	want := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { want[i], errs[i] = Text(url, Greedy(Tale(i), maxTokens)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	return want
}

// Streamed is what a client saw of a streamed completion.
type Streamed struct {
	Text, Finish string
	Usage        *protocol.Usage
	TTFT         time.Duration // from the request to its first text
}

// Stream posts a streamed completion with usage to url, calls firstText
// once at its first text (or when it fails before), and reads it to
// [DONE].
func Stream(url string, body map[string]any, firstText func()) (Streamed, error) {
	var out Streamed
	begin := time.Now()
	first := sync.OnceFunc(func() {
		out.TTFT = time.Since(begin)
		firstText()
	})
	defer first() // a stream that failed early does not hold the others
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("status %d", resp.StatusCode)
	}
	var sb strings.Builder
	sse := protocol.NewSSEReader(resp.Body, 0)
	for {
		data, err := sse.Next()
		if err != nil {
			return out, fmt.Errorf("the stream ended without [DONE]: %w", err)
		}
		if protocol.IsDone(data) {
			out.Text = sb.String()
			return out, nil
		}
		if e := protocol.ParseError(0, data); e != nil {
			return out, e
		}
		var chunk protocol.CompletionResponse
		if err := json.Unmarshal(data, &chunk); err != nil {
			return out, err
		}
		if chunk.Usage != nil {
			out.Usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Text != "" {
				sb.WriteString(ch.Text)
				first()
			}
			if r := ch.Finished(); r != "" {
				out.Finish = r
			}
		}
	}
}

// ExactStreams streams Tale(i) through the router at url for each
// want[i], each checked exact, ended by its length and its usage counted
// once; it returns once every stream has text, and finish waits for them
// all and reports the failures.
func ExactStreams(t *testing.T, url string, want []string, maxTokens int) (finish func()) {
	var started, wg sync.WaitGroup
	started.Add(len(want))
	errs := make(chan error, len(want))
	for i := range want {
		wg.Go(func() {
			got, err := Stream(url, Greedy(Tale(i), maxTokens), started.Done)
			switch {
			case err != nil:
				errs <- fmt.Errorf("stream %d: %w", i, err)
			case got.Text != want[i]:
				errs <- fmt.Errorf("stream %d:\n got  %q\n want %q", i, got.Text, want[i])
			case got.Usage == nil || got.Usage.CompletionTokens != maxTokens || got.Finish != protocol.FinishLength:
				errs <- fmt.Errorf("stream %d: finish %q usage %+v, want %d tokens once", i, got.Finish, got.Usage, maxTokens)
			}
		})
	}
	started.Wait()
	return func() {
		t.Helper()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}
