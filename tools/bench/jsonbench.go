package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// jsonGoal is issue 43's bound: time per output token with a schema over
// the time without one.
const jsonGoal = 1.2

// jsonSchema is the schema the -json run asks for: a record with the
// keywords clients use most.
const jsonSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string","pattern":"^[a-z]+@[a-z]+\\.[a-z]{2,3}$"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^\\d{5}$"}},"required":["city","zip"],"additionalProperties":false}},"required":["name","age","email","tags","address"],"additionalProperties":false}`

// runJSON measures one built-in engine on cfg.jsonModel: requests with
// the schema and without, alternating so that both see the same load;
// the first schema request, which compiles the grammar and fills its
// masks, apart.
func (b *bench) runJSON(ctx context.Context, cfg *config, args []string, stdout io.Writer, load *loadWatch, started time.Time) error {
	engines, err := b.startEnginesModel(ctx, 1, cfg.jsonModel)
	if err != nil {
		return err
	}
	url := "http://" + engines[0] + protocol.PathCompletions
	const prompt = "Describe a person as JSON."
	format := map[string]any{"type": "json_object", "schema": jsonSchema}
	plain := map[string]any{"prompt": prompt, "max_tokens": 64, "temperature": 0, "debug_config": map[string]any{"ignore_eos": true}}
	schema := map[string]any{"prompt": prompt, "max_tokens": 400, "temperature": 0, "response_format": format}
	if _, err := jsonCall(ctx, url, plain); err != nil { // warm the engine
		return err
	}
	first, err := jsonCall(ctx, url, schema)
	if err != nil {
		return err
	}
	rounds := max(cfg.rounds, 1) * 5
	var with, without []float64
	for range rounds {
		p, err := jsonCall(ctx, url, plain)
		if err != nil {
			return err
		}
		s, err := jsonCall(ctx, url, schema)
		if err != nil {
			return err
		}
		without, with = append(without, p.perToken), append(with, s.perToken)
	}
	metrics, err := getBody(ctx, "http://"+engines[0]+"/metrics")
	if err != nil {
		return err
	}
	var hostileOut, coverageOut bytes.Buffer
	hostileErr := runHostile(ctx, engines[0], b.procs.last().pid(), &hostileOut)
	var coverageErr error
	if cfg.coverage {
		coverageErr = runCoverage(ctx, url, median(without), cfg.check, &coverageOut)
	}
	b.procs.stopAll()
	load.sample()
	ratio := median(with) / median(without)
	fmt.Fprintf(stdout, "### Structured output, %s\n\n`%s` (%v, commit %s), one built-in engine on %s; %s.\n\n",
		time.Now().Format("2006-01-02 15:04"), commandLine(args), time.Since(started).Round(time.Second), commit(), cfg.jsonModel, load)
	fmt.Fprintln(stdout, "| requests | rounds | ms per output token (median) | tokens |")
	fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: |")
	fmt.Fprintf(stdout, "| no format (ignore_eos) | %d | %.2f | 64 |\n", rounds, median(without)*1e3)
	fmt.Fprintf(stdout, "| schema, cached grammar | %d | %.2f | %d |\n", rounds, median(with)*1e3, first.tokens)
	fmt.Fprintf(stdout, "| schema, first request (compile and masks: %.0f ms in all) | 1 | %.2f | %d |\n\n", first.took.Seconds()*1e3, first.perToken*1e3, first.tokens)
	fmt.Fprintf(stdout, "Ratio with/without: %.2f× (goal ≤ %.1f×). First answer: %s\n\n", ratio, jsonGoal, first.text)
	for _, name := range []string{"mlc_engine_grammar_cache_grammars", "mlc_engine_grammar_cache_states", "mlc_engine_grammar_compile_seconds_total", "mlc_engine_grammar_masks_computed_total", "mlc_engine_grammar_mask_seconds_total"} {
		if v, err := counterValue(metrics, name); err == nil {
			fmt.Fprintf(stdout, "- %s %g\n", name, v)
		}
	}
	fmt.Fprintf(stdout, "\nThe hostile schemas of internal/testkit/hostile on the same engine, one after another, beside a stream of plain completions:\n\n%s", hostileOut.Bytes())
	if hostileErr != nil {
		return hostileErr
	}
	if cfg.coverage {
		fmt.Fprintf(stdout, "\nThe real-world schemas of internal/testkit/schemacorpus on the same engine, each asked twice (the first compiles it and fills its masks):\n\n%s", coverageOut.Bytes())
		if coverageErr != nil {
			return coverageErr
		}
	}
	if cfg.check && ratio > jsonGoal {
		return fmt.Errorf("-check: time per output token with a schema is %.2f× the time without, more than %.1f×", ratio, jsonGoal)
	}
	return nil
}

type jsonResult struct {
	text     string
	tokens   int
	took     time.Duration
	perToken float64 // seconds
}

// jsonCall runs one completion, whole, and times it.
func jsonCall(ctx context.Context, url string, body map[string]any) (jsonResult, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return jsonResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return jsonResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return jsonResult{}, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil {
		return jsonResult{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return jsonResult{}, fmt.Errorf("%s: %d %s", url, resp.StatusCode, out)
	}
	var cr protocol.CompletionResponse
	if err := json.Unmarshal(out, &cr); err != nil || len(cr.Choices) == 0 || cr.Usage == nil {
		return jsonResult{}, fmt.Errorf("%s: answer %s: %v", url, out, err)
	}
	if _, ok := body["response_format"]; ok && !json.Valid([]byte(cr.Choices[0].Text)) {
		return jsonResult{}, fmt.Errorf("the answer with a schema is not JSON: %q", cr.Choices[0].Text)
	}
	n := max(cr.Usage.CompletionTokens, 1)
	return jsonResult{text: cr.Choices[0].Text, tokens: n, took: took, perToken: took.Seconds() / float64(n)}, nil
}

// median of xs (not empty).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
