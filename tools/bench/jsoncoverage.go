package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schemacorpus"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// coverageGoal is issue B's share of real-world schemas served.
const coverageGoal = 0.95

// runCoverage serves each real-world schema of the corpus on the engine
// at url, twice: how many it served (200 rather than a 400), how many
// answers validate (an independent validator, formats asserted), how
// many were cut (max_tokens), and the time per output token of the warm
// answers against perPlain, that of answers without a format.
func runCoverage(ctx context.Context, url string, perPlain float64, check bool, out io.Writer) error {
	corpus := schemacorpus.RealWorld()
	served, valid, cut := 0, 0, 0
	var cold, warm []float64
	var notes []string
	var failed error
	for _, s := range corpus {
		body := map[string]any{"prompt": "Answer in JSON.", "max_tokens": 400, "temperature": 0,
			"response_format": map[string]any{"type": "json_object", "schema": s.Text}}
		t0 := time.Now()
		status, text, tokens, err := hostileCall(ctx, strings.TrimSuffix(url, protocol.PathCompletions), body)
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			notes = append(notes, fmt.Sprintf("- refused %s: %.200s", s.Name, text))
			continue
		}
		served++
		again, err := jsonCall(ctx, url, body)
		if err != nil {
			return err
		}
		cold, warm = append(cold, took.Seconds()/float64(max(tokens, 1))), append(warm, again.perToken)
		if tokens >= 400 {
			cut++
			continue
		}
		v, err := schematest.TryCompileFormats(s.Text)
		if err != nil {
			return fmt.Errorf("%s: the validator reads no schema: %v", s.Name, err)
		}
		if !schematest.Valid(v, text) || again.text != text {
			failed = fmt.Errorf("%s: the answer %q does not validate, or differs asked again (%q)", s.Name, text, again.text)
			notes = append(notes, fmt.Sprintf("- invalid %s: %q", s.Name, text))
			continue
		}
		valid++
	}
	n := len(corpus)
	fmt.Fprintln(out, "| schemas | served | valid answers | cut (max_tokens) | ms per output token, first / again (median) | without a format | ratio again/without |")
	fmt.Fprintln(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	ratio := 0.0
	if len(warm) > 0 {
		ratio = median(warm) / perPlain
		fmt.Fprintf(out, "| %d | %d (%.1f%%) | %d of %d | %d | %.2f / %.2f | %.2f | %.2f× |\n\n", n, served, 100*float64(served)/float64(n),
			valid, served, cut, median(cold)*1e3, median(warm)*1e3, perPlain*1e3, ratio)
	}
	for _, note := range notes {
		fmt.Fprintln(out, note)
	}
	switch {
	case failed != nil:
		return failed
	case check && float64(served) < coverageGoal*float64(n):
		return fmt.Errorf("-check: served %d of %d real-world schemas, under %.0f%%", served, n, 100*coverageGoal)
	case check && ratio > jsonGoal:
		return fmt.Errorf("-check: time per output token with a corpus schema is %.2f× the time without, more than %.1f×", ratio, jsonGoal)
	}
	return nil
}
