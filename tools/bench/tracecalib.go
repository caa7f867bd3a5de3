package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/timing"
)

// The trace run's calibration: one timed engine alone, straight (no
// Caddy), whose time to first token and time per output token must
// follow its profile: a prompt's prefill is its chunks' steps, a decode
// step its context's. On an idle machine they do within calibTolerance;
// on a busy one the engine's wake-ups run late, which the table shows.

// calibPrompts are the prompt lengths measured, each with calibTokens
// generated, calibRuns times: the run of the fastest first token counts,
// the figure of an idle machine. (Its time per output token is its own:
// a run whose first token came late has its decode steps catch up with
// their modelled ends, and reads faster.)
var calibPrompts = []int{2048, 8192, 32768}

const (
	calibTokens    = 33
	calibRuns      = 3
	calibTolerance = 0.05
	calibChunk     = 2048 // the timed engine's prefill_chunk_size
)

// calibRow is one prompt length's figures: measured and modelled.
type calibRow struct {
	prompt                 int
	ttft, wantTTFT         time.Duration
	tpot, wantTPOT         time.Duration
	ttftOff, tpotOff       float64 // measured over modelled, less 1
	withinTTFT, withinTPOT bool
}

// calibrate measures the profile's engine alone.
func (b *bench) calibrate(ctx context.Context, tc *traceConfig) ([]calibRow, error) {
	mark := b.procs.count()
	defer func() { b.procs.stopLast(b.procs.count() - mark) }()
	p, err := timing.ByName(tc.profile)
	if err != nil {
		return nil, err
	}
	engines, _, err := b.startEngineSet(ctx, engineSet{n: 1, model: "tiny", logs: "calibrate-",
		args: func(int) []string {
			return []string{"--timing", tc.profile, "--time-scale", strconv.FormatFloat(float64(tc.scale), 'g', -1, 64), "--eos-every", "0"}
		}})
	if err != nil {
		return nil, err
	}
	client := traceClient()
	defer client.CloseIdleConnections()
	rng := rand.New(rand.NewPCG(7, 11))
	words := promptWords()
	var rows []calibRow
	for _, n := range calibPrompts {
		r := calibRow{prompt: n, wantTTFT: prefillTime(p, n), wantTPOT: decodeTime(p, n)}
		for range calibRuns {
			prompt := make([]int, n)
			for i := range prompt {
				prompt[i] = words[rng.IntN(len(words))] // a fresh prompt: nothing cached
			}
			ttft, tpot, err := calibOnce(ctx, client, "http://"+engines[0], prompt, tc.scale)
			if err != nil {
				return nil, fmt.Errorf("calibration, %d tokens: %w", n, err)
			}
			if r.ttft == 0 || ttft < r.ttft {
				r.ttft, r.tpot = ttft, tpot
			}
		}
		r.ttftOff, r.tpotOff = float64(r.ttft)/float64(r.wantTTFT)-1, float64(r.tpot)/float64(r.wantTPOT)-1
		r.withinTTFT, r.withinTPOT = math.Abs(r.ttftOff) <= calibTolerance, math.Abs(r.tpotOff) <= calibTolerance
		rows = append(rows, r)
	}
	return rows, nil
}

// prefillTime is the profile's time to first token of a fresh prompt of
// n tokens: its chunks, each after the ones before, the last sampling.
func prefillTime(p timing.Profile, n int) time.Duration {
	var d time.Duration
	for done := 0; done < n; done += calibChunk {
		chunk := min(calibChunk, n-done)
		step := timing.Step{Prefill: []timing.Chunk{{New: chunk, Cached: done}}}
		if done+chunk == n {
			step.Sampled = 1
		}
		d += p.StepTime(step)
	}
	return d
}

// decodeTime is the profile's mean decode step of the calibTokens-1
// tokens after a prompt of n.
func decodeTime(p timing.Profile, n int) time.Duration {
	var d time.Duration
	for i := 1; i < calibTokens; i++ {
		d += p.StepTime(timing.Step{Decode: 1, Context: n + i, Sampled: 1})
	}
	return d / (calibTokens - 1)
}

// calibOnce streams one completion straight to the engine and returns its
// modelled time to first token and per output token.
func calibOnce(ctx context.Context, client *http.Client, base string, prompt []int, scale timeScale) (ttft, tpot time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, traceTimeout)
	defer cancel()
	resp, t0, err := postCompletion(ctx, client, base, traceBody(prompt, calibTokens), nil)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, answerError(resp)
	}
	first, last, tokens, err := streamTimes(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if tokens != calibTokens {
		return 0, 0, fmt.Errorf("%d tokens generated, want %d", tokens, calibTokens)
	}
	return scale.modelled(first.Sub(t0)), scale.modelled(last.Sub(first)) / (calibTokens - 1), nil
}

// writeCalibration prints the calibration's table.
func writeCalibration(w io.Writer, tc *traceConfig, rows []calibRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "**One timed engine alone** (%s, time scale %g, straight to the engine, the run of the fastest first token of %d): measured · modelled, and how far off (goal: within %.0f%%).\n\n", tc.profile, float64(tc.scale), calibRuns, 100*calibTolerance)
	fmt.Fprintln(w, "| prompt tokens | TTFT ms | off | TPOT ms | off |")
	fmt.Fprintln(w, "| --: | --: | --: | --: | --: |")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %.1f · %.1f | %+.1f%%%s | %.2f · %.2f | %+.1f%%%s |\n", r.prompt, ms(r.ttft), ms(r.wantTTFT), 100*r.ttftOff, missMark(r.withinTTFT),
			ms(r.tpot), ms(r.wantTPOT), 100*r.tpotOff, missMark(r.withinTPOT))
	}
	fmt.Fprintln(w)
}

func missMark(ok bool) string {
	if ok {
		return ""
	}
	return " ✗"
}
