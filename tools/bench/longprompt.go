package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// The long-prompt run (issue 39): two built-in engines slowed so that a
// long prompt alone takes three times engine_timeout to prefill, a few
// such requests, streamed, among closed-loop clients of short ones. What
// it holds the router to: every long request answered with the text an
// unloaded engine gives, in one attempt (mlc_attempts in the access log),
// no breaker opened and no engine out of rotation (the router's
// /mlc/engines, polled), a keep-alive on each long stream about every
// keepalive while it waits, and the short requests' TTFT p99 within
// longGoal of the same clients' without the long ones (-check).

// longGoal is the bound on the short requests' TTFT p99 with the
// long prompts over without them.
const longGoal = 2.0

// longShape is the run's size.
type longShape struct {
	longTokens, longs, longGenerate int
	clients, shortPrompt, shortGen  int
	engineTimeout, keepAlive        time.Duration
	// alone is how long the short clients run without the long prompts.
	alone time.Duration
}

// longShapes: the issue's, and -quick's, a prompt the tiny model
// prefills in about a second on one core, and timeouts to match.
var (
	fullLong  = longShape{12000, 4, 16, 32, 32, 16, 15 * time.Second, 10 * time.Second, 20 * time.Second}
	quickLong = longShape{3000, 4, 16, 32, 32, 16, 2 * time.Second, 2 * time.Second, 6 * time.Second}
)

// longTimes is how long a prefill alone should take, in engine timeouts.
const longTimes = 3

// longChunk is the engines' prefill_chunk_size: a step that prefills a
// chunk of a long prompt takes its compute and its delay, and the tiny
// model's attention on a CPU makes a 512-token chunk (the default) deep
// in a 12,000-token prompt cost seconds, over engine_timeout on a busy
// machine, where a GPU's step takes milliseconds. The streams decoding
// meanwhile would be silent for it, and their engine taken for a stalled
// one. Smaller chunks keep a step within a second or so (-long-chunk
// sets another).
const longChunk = 64

// prefillMargin is how much slower than the engines' measured speed the
// router's prefill_rate is set: an operator's conservative rate.
const prefillMargin = 1.5

// longResult is one long request's answer.
type longResult struct {
	id         string
	text       string
	prompt     int
	ttft, took time.Duration
	keepAlives int
	// silence is the longest time the stream sent nothing before its
	// first token (a keep-alive or the token ends it).
	silence  time.Duration
	attempts int // from the access log; 0 unknown
	err      error
}

// shortSample is one short request.
type shortSample struct {
	sent       time.Time
	ttft, took time.Duration
	err        error
}

// longRun is what the run measured.
type longRun struct {
	shape       longShape
	compute     time.Duration // the slowest reference prefill, undelayed
	delay       time.Duration // the engines' prefill delay per token
	rate        float64       // the router's prefill_rate
	chunk       int           // the engines' prefill_chunk_size
	refs        []string
	longs       []longResult
	alone, with []shortSample
	// aloneWall and withWall are the times the samples were sent over.
	aloneWall, withWall time.Duration
	retried             int      // short requests with more than one attempt
	unwell              []string // engine states and breakers other than ready and closed, as seen
}

func (b *bench) runLongPrompt(ctx context.Context, cfg *config, args []string, stdout io.Writer, load *loadWatch, started time.Time) error {
	shape := fullLong
	if cfg.quick {
		shape = quickLong
	}
	if cfg.longTokens > 0 {
		shape.longTokens = cfg.longTokens
	}
	run := &longRun{shape: shape}
	run.chunk = cmp.Or(cfg.longChunk, longChunk)
	kv := shape.longs*(shape.longTokens+shape.longGenerate) + shape.clients*(shape.shortPrompt+shape.shortGen) + 4096
	b.engineArgs = []string{"--overrides", fmt.Sprintf("max_total_seq_length=%d;prefill_chunk_size=%d", kv, run.chunk)}
	engines, err := b.startEngines(ctx, 2)
	if err != nil {
		return err
	}
	prompts := make([][]int, shape.longs)
	for i := range prompts {
		prompts[i] = agentTokens(uint64(3900+i), shape.longTokens)
	}
	progressf("longprompt: %d reference answers of %d-token prompts, the engines unloaded and undelayed", shape.longs, shape.longTokens)
	if run.refs, run.compute, err = longReferences(ctx, engines, prompts, shape.longGenerate); err != nil {
		return err
	}
	want := longTimes * shape.engineTimeout
	run.delay = max(want-run.compute, 0) / time.Duration(shape.longTokens)
	run.rate = float64(shape.longTokens) / max(want, run.compute).Seconds() / prefillMargin
	body := fmt.Sprintf(`{"prefill_delay_us": %d, "decode_delay_us": 0}`, run.delay.Microseconds())
	for _, e := range engines {
		if _, err := call(ctx, http.MethodPost, "http://"+e+"/builtin/slowness", []byte(body), adminTimeout, 1<<20); err != nil {
			return err
		}
	}
	const name = "longprompt"
	logPath := filepath.Join(b.work, name, "access.log")
	caddy, err := b.startCaddy(ctx, name, loggedRouter(logPath, mlcWhole(external(engines),
		"engine_timeout "+shape.engineTimeout.String(), "keepalive "+shape.keepAlive.String(),
		fmt.Sprintf("prefill_rate %.0f", run.rate))), false)
	if err != nil {
		return err
	}
	err = poll(ctx, startTimeout, func() (bool, error) {
		st, err := caddyStatus(ctx, caddy)
		return err == nil && len(st.Engines) == len(engines) && !slices.ContainsFunc(st.Engines, func(e fleet.EngineStatus) bool { return e.State != "ready" }), err
	})
	if err != nil {
		return fmt.Errorf("the router's engines to be ready: %w", err)
	}
	stopWatch := watchEngines(ctx, caddy, &run.unwell)
	progressf("longprompt: %d short clients alone for %v", shape.clients, shape.alone)
	run.alone = shortLoad(ctx, caddy.base, shape, func(context.Context) { sleepCtx(ctx, shape.alone) })
	progressf("longprompt: %d short clients and %d long prompts (delay %v a token, engine_timeout %v)", shape.clients, shape.longs, run.delay, shape.engineTimeout)
	var window [2]time.Time
	run.with = shortLoad(ctx, caddy.base, shape, func(ctx context.Context) {
		sleepCtx(ctx, time.Second) // the short clients' steady state
		window[0] = time.Now()
		run.longs = longLoad(ctx, caddy.base, prompts, shape.longGenerate)
		window[1] = time.Now()
	})
	stopWatch()
	run.aloneWall, run.withWall = shape.alone, window[1].Sub(window[0])
	run.with = slices.DeleteFunc(run.with, func(s shortSample) bool { return s.sent.Before(window[0]) || s.sent.After(window[1]) })
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := readAttempts(ctx, logPath, run); err != nil {
		return err
	}
	b.procs.stopAll()
	load.sample()
	fmt.Fprintf(stdout, "### Long prompts among short ones, %s\n\n`%s` (%v, commit %s), two built-in engines, mode whole; %s.\n\n",
		time.Now().Format("2006-01-02 15:04"), commandLine(args), time.Since(started).Round(time.Second), commit(), load)
	writeLong(stdout, run)
	return checkLong(run, cfg.check)
}

// loggedRouter is handler behind a JSON access log at path that carries
// the router's request variables.
func loggedRouter(path, handler string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "log {\n\toutput file %s\n\tformat json\n}\nroute {\n", path)
	for _, v := range []string{router.VarRequestID, router.VarAttempts, router.VarPromptTokens} {
		fmt.Fprintf(&b, "\tlog_append %s %s\n", v, v)
	}
	b.WriteString(indent(handler))
	b.WriteString("}\n")
	return b.String()
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// longReferences has the engines answer each prompt directly, two at a
// time (one each), and returns the texts and the longest answer's time:
// the prefill's compute on this machine, undelayed.
func longReferences(ctx context.Context, engines []string, prompts [][]int, generate int) ([]string, time.Duration, error) {
	texts := make([]string, len(prompts))
	var slowest time.Duration
	for lo := 0; lo < len(prompts); lo += len(engines) {
		var wg sync.WaitGroup
		errs := make([]error, len(engines))
		took := make([]time.Duration, len(engines))
		for k := range engines {
			i := lo + k
			if i >= len(prompts) {
				break
			}
			wg.Go(func() {
				defer goroutine.Recover(logger, "longprompt reference", func(p any) { errs[k] = fmt.Errorf("panic: %v", p) })
				body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prompts[i], "max_tokens": generate, "temperature": 0})
				t0 := time.Now()
				text, err := completeText(ctx, "http://"+engines[k], body)
				texts[i], took[k], errs[k] = text, time.Since(t0), err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, 0, fmt.Errorf("reference answers: %w", err)
		}
		slowest = max(slowest, slices.Max(took))
	}
	return texts, slowest, nil
}

// completeText is the text of a whole completion of body from base.
func completeText(ctx context.Context, base string, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	resp, _, err := postCompletion(ctx, http.DefaultClient, base, body, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", answerError(resp)
	}
	var cr struct{ Choices []struct{ Text string } }
	if err := json.NewDecoder(resp.Body).Decode(&cr); err != nil || len(cr.Choices) != 1 {
		return "", fmt.Errorf("%s: an answer without one choice: %v", base, err)
	}
	return cr.Choices[0].Text, nil
}

// shortLoad runs the short clients, each a stream after another, while
// during runs, and returns their requests.
func shortLoad(ctx context.Context, base string, shape longShape, during func(context.Context)) []shortSample {
	stop := make(chan struct{})
	client := &http.Client{Timeout: requestTimeout}
	var mu sync.Mutex
	var out []shortSample
	var wg sync.WaitGroup
	for k := range shape.clients {
		wg.Go(func() {
			defer goroutine.Recover(logger, "longprompt short client", nil)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				prompt := agentTokens(uint64(k)<<32|uint64(i), shape.shortPrompt)
				s := shortCall(ctx, client, base, prompt, shape.shortGen)
				mu.Lock()
				out = append(out, s)
				mu.Unlock()
			}
		})
	}
	func() {
		defer goroutine.Recover(logger, "longprompt load", nil)
		during(ctx)
	}()
	close(stop)
	wg.Wait()
	return out
}

// shortCall streams one short completion and times its first token.
func shortCall(ctx context.Context, client *http.Client, base string, prompt []int, generate int) shortSample {
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": generate, "temperature": 0, "stream": true})
	resp, t0, err := postCompletion(ctx, client, base, body, nil)
	s := shortSample{sent: t0}
	if err != nil {
		s.err = err
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.err = answerError(resp)
		return s
	}
	_, s.err = readEvents(resp.Body, func(at time.Time, first bool, _ time.Time, _ []byte) {
		if first {
			s.ttft = at.Sub(t0)
		}
	})
	if s.err == nil && s.ttft == 0 {
		s.err = errors.New("a stream without tokens")
	}
	s.took = time.Since(t0)
	return s
}

// longLoad streams the long prompts through base, all at once.
func longLoad(ctx context.Context, base string, prompts [][]int, generate int) []longResult {
	out := make([]longResult, len(prompts))
	client := &http.Client{Timeout: 15 * time.Minute}
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			defer goroutine.Recover(logger, "longprompt long client", func(p any) { out[i].err = fmt.Errorf("panic: %v", p) })
			out[i] = longCall(ctx, client, base, p, generate)
		})
	}
	wg.Wait()
	return out
}

// longCall streams one long completion, reading its lines as they come:
// the keep-alive comments, the text, the request's id and its usage.
func longCall(ctx context.Context, client *http.Client, base string, prompt []int, generate int) longResult {
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": generate, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
	var r longResult
	resp, t0, err := postCompletion(ctx, client, base, body, nil)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.err = answerError(resp)
		return r
	}
	last := t0
	var text strings.Builder
	done := false
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		now, line := time.Now(), lines.Bytes()
		waiting := r.ttft == 0
		switch {
		case bytes.HasPrefix(line, []byte(":")):
			r.keepAlives++
		case bytes.Equal(line, []byte("data: [DONE]")):
			done = true
		case bytes.HasPrefix(line, []byte("data: ")):
			var chunk struct {
				ID      string
				Choices []struct{ Text string }
				Usage   *struct {
					PromptTokens int `json:"prompt_tokens"`
				}
				Error json.RawMessage
			}
			if err := json.Unmarshal(line[len("data: "):], &chunk); err != nil {
				r.err = fmt.Errorf("%w: %.200s", err, line)
				return r
			}
			if chunk.Error != nil {
				r.err = fmt.Errorf("error event: %.300s", line)
				return r
			}
			r.id = chunk.ID
			if len(chunk.Choices) > 0 {
				text.WriteString(chunk.Choices[0].Text)
				if r.ttft == 0 {
					r.ttft = now.Sub(t0)
				}
			}
			if chunk.Usage != nil {
				r.prompt = chunk.Usage.PromptTokens
			}
		default:
			continue // the blank line that ends an event
		}
		if waiting {
			r.silence = max(r.silence, now.Sub(last))
			last = now
		}
	}
	r.took = time.Since(t0)
	r.text = text.String()
	switch {
	case lines.Err() != nil:
		r.err = lines.Err()
	case !done:
		r.err = errNoDone
	}
	return r
}

// watchEngines polls the router's /mlc/engines until stop is called and
// notes every engine state but ready and every breaker but closed.
func watchEngines(ctx context.Context, c *caddyProc, unwell *[]string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	seen := map[string]bool{}
	note := func(s string) {
		if !seen[s] {
			seen[s] = true
			*unwell = append(*unwell, s)
		}
	}
	goroutine.Go(logger, "longprompt engine watch", func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			st, err := caddyStatus(ctx, c)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				note("/mlc/engines: " + err.Error())
			}
			for _, e := range st.Engines {
				if e.State != "ready" {
					note(e.Addr + " " + e.State)
				}
				if e.Breaker != "closed" {
					note(e.Addr + " breaker " + e.Breaker)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}, func(p any) { note(fmt.Sprintf("watch panicked: %v", p)) })
	return func() { cancel(); <-done }
}

// readAttempts reads each long request's attempts from the access log,
// and counts the short requests tried more than once; Caddy writes an
// entry once its request has ended, so it waits for the long ones'.
func readAttempts(ctx context.Context, path string, run *longRun) error {
	return poll(ctx, 10*time.Second, func() (bool, error) {
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return false, err
		}
		attempts := map[string]int{}
		run.retried = 0
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e struct {
				ID       string  `json:"mlc_request_id"`
				Attempts float64 `json:"mlc_attempts"`
				Prompt   float64 `json:"mlc_prompt_tokens"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.ID == "" {
				continue
			}
			attempts[e.ID] = int(e.Attempts)
			if int(e.Prompt) != run.shape.longTokens && e.Attempts > 1 {
				run.retried++
			}
		}
		all := true
		for i := range run.longs {
			r := &run.longs[i]
			r.attempts = attempts[r.id]
			all = all && (r.id == "" || r.attempts > 0)
		}
		return all, nil
	})
}

func writeLong(w io.Writer, run *longRun) {
	s := run.shape
	alone := run.compute + run.delay*time.Duration(s.longTokens)
	fmt.Fprintf(w, "Engines: `prefill_chunk_size %d`; a %d-token prompt alone took %.1f s to answer, undelayed; with %v added per prompt token, %.0f s: %.1fx engine_timeout %v (goal %dx; above it when the compute alone is). Router: mode whole, least_loaded, `engine_timeout %v`, `keepalive %v`, `prefill_rate %.0f` (%.1fx slower than the engines' speed). %d clients of %d-token prompts, %d generated, streamed; %d long prompts, %d generated, streamed, sent together after a second.\n\n",
		run.chunk, s.longTokens, run.compute.Seconds(), run.delay, alone.Seconds(), alone.Seconds()/s.engineTimeout.Seconds(), s.engineTimeout, longTimes,
		s.engineTimeout, s.keepAlive, run.rate, prefillMargin, s.clients, s.shortPrompt, s.shortGen, s.longs, s.longGenerate)
	fmt.Fprintln(w, "| long | prompt tokens | TTFT s | total s | attempts | exact | keep-alives | longest silence s | error |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --- | --: | --: | --- |")
	for i, r := range run.longs {
		errText := ""
		if r.err != nil {
			errText = strings.ReplaceAll(fmt.Sprintf("%.100s", r.err.Error()), "|", "/")
		}
		fmt.Fprintf(w, "| %d | %d | %.1f | %.1f | %d | %s | %d | %.1f | %s |\n", i+1, r.prompt, r.ttft.Seconds(), r.took.Seconds(),
			r.attempts, yesNo(r.err == nil && r.text == run.refs[i]), r.keepAlives, r.silence.Seconds(), errText)
	}
	fmt.Fprintln(w, "\n| short requests | sent | failed | requests/s | TTFT p50 ms | TTFT p99 ms | latency p50 ms | latency p99 ms | first error |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --: | --: | --: | --- |")
	for _, row := range []struct {
		name string
		ss   []shortSample
		wall time.Duration
	}{{"alone", run.alone, run.aloneWall}, {"with the long prompts", run.with, run.withWall}} {
		ttfts, failed := shortTTFTs(row.ss)
		var took []time.Duration
		first := ""
		for _, s := range row.ss {
			if s.err == nil {
				took = append(took, s.took)
			} else if first == "" {
				first = strings.ReplaceAll(fmt.Sprintf("%.100s", s.err.Error()), "|", "/")
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", row.name, len(row.ss), failed, div(float64(len(row.ss)), row.wall.Seconds()),
			ms(percentile(ttfts, 0.5)), ms(percentile(ttfts, 0.99)), ms(percentile(took, 0.5)), ms(percentile(took, 0.99)), first)
	}
	fmt.Fprintf(w, "\nShort requests' TTFT p99 with the long prompts over without: **%.2fx** (goal ≤ %.0fx). Short requests tried more than once: %d. Engines out of ready or breakers open, as /mlc/engines showed every 200 ms: %s.\n",
		longRatio(run), longGoal, run.retried, cmpOrNone(strings.Join(run.unwell, "; ")))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func cmpOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// shortTTFTs are the answered requests' times to first token, and how
// many failed.
func shortTTFTs(ss []shortSample) ([]time.Duration, int) {
	var out []time.Duration
	failed := 0
	for _, s := range ss {
		if s.err != nil {
			failed++
			continue
		}
		out = append(out, s.ttft)
	}
	return out, failed
}

// longRatio is the short requests' TTFT p99 with over without.
func longRatio(run *longRun) float64 {
	with, _ := shortTTFTs(run.with)
	alone, _ := shortTTFTs(run.alone)
	return div(float64(percentile(with, 0.99)), float64(percentile(alone, 0.99)))
}

// checkLong holds the run to what must be true whatever the machine's
// load (every long request exact in one attempt, kept alive; no engine
// blamed; no short request failed) and, with check, to the TTFT goal.
func checkLong(run *longRun, check bool) error {
	var missed []string
	every := run.shape.keepAlive * 3 / 2 // a keep-alive's interval, and the timer's slack
	for i, r := range run.longs {
		switch {
		case r.err != nil:
			missed = append(missed, fmt.Sprintf("long %d failed: %v", i+1, r.err))
		case r.text != run.refs[i]:
			missed = append(missed, fmt.Sprintf("long %d's text %q is not the reference's %q", i+1, r.text, run.refs[i]))
		case r.attempts != 1:
			missed = append(missed, fmt.Sprintf("long %d took %d attempts (access log), want 1", i+1, r.attempts))
		case r.silence > every:
			missed = append(missed, fmt.Sprintf("long %d sent nothing for %v before its first token (keepalive %v)", i+1, r.silence.Round(time.Millisecond), run.shape.keepAlive))
		}
	}
	if len(run.unwell) > 0 {
		missed = append(missed, "engines blamed: "+strings.Join(run.unwell, "; "))
	}
	for _, ss := range [][]shortSample{run.alone, run.with} {
		if _, failed := shortTTFTs(ss); failed > 0 {
			missed = append(missed, fmt.Sprintf("%d short requests failed", failed))
		}
	}
	if ratio := longRatio(run); check && !(ratio <= longGoal) {
		missed = append(missed, fmt.Sprintf("short requests' TTFT p99 is %.2fx with the long prompts, over %.0fx", ratio, longGoal))
	}
	if len(missed) > 0 {
		return fmt.Errorf("longprompt: %s", strings.Join(missed, "; "))
	}
	return nil
}
