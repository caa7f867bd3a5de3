package main

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
)

// The short form of the long-prompt run, end to end: every long prompt
// is in the table, answered exactly in one attempt and kept alive while
// it waited (the run fails otherwise), the short requests are measured
// with and without them, and nothing the run started outlives it.
func TestLongPromptShortForm(t *testing.T) {
	before := enginetest.Children(t)
	var out bytes.Buffer
	// Fewer tokens than -quick's: the engines here are this test binary,
	// which -race makes several times slower.
	const tokens = 1000
	if err := run([]string{"-longprompt", "-quick", "-long-tokens", strconv.Itoa(tokens), "-caddy", os.Args[0]}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	longs, err := parseTable(out.String(), []string{"long", "prompt tokens", "TTFT s", "total s", "attempts", "exact", "keep-alives", "longest silence s", "error"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(longs) != quickLong.longs {
		t.Fatalf("%d long prompts in the table, want %d:\n%s", len(longs), quickLong.longs, out.String())
	}
	for _, row := range longs {
		if row["prompt tokens"] != strconv.Itoa(tokens) || row["attempts"] != "1" || row["exact"] != "yes" {
			t.Errorf("long %s: %v", row["long"], row)
		}
	}
	shorts, err := parseTable(out.String(), []string{"short requests", "sent", "failed", "requests/s", "TTFT p50 ms", "TTFT p99 ms", "latency p50 ms", "latency p99 ms", "first error"})
	if err != nil || len(shorts) != 2 {
		t.Fatalf("short requests' table: %v\n%s", err, out.String())
	}
	for _, row := range shorts {
		if n, err := strconv.Atoi(row["sent"]); err != nil || n == 0 || row["failed"] != "0" {
			t.Errorf("short requests %s: %v", row["short requests"], row)
		}
	}
	for pid := range enginetest.Children(t) {
		if !before[pid] {
			t.Errorf("process %d outlived the run", pid)
		}
	}
}

// checkLong fails a run on what must hold whatever the load, and on the
// TTFT goal only with -check.
func TestCheckLong(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	shorts := func(p99 time.Duration) []shortSample {
		out := make([]shortSample, 100)
		for i := range out {
			out[i].ttft = ms(10)
		}
		out[98].ttft, out[99].ttft = p99, p99
		return out
	}
	good := func() *longRun {
		return &longRun{shape: quickLong, refs: []string{"a", "b"},
			longs: []longResult{{text: "a", attempts: 1, silence: ms(1900)}, {text: "b", attempts: 1, silence: ms(2100)}},
			alone: shorts(ms(100)), with: shorts(ms(150))}
	}
	if err := checkLong(good(), true); err != nil {
		t.Errorf("a run that met everything: %v", err)
	}
	for name, spoil := range map[string]func(r *longRun){
		"inexact":        func(r *longRun) { r.longs[1].text = "c" },
		"two attempts":   func(r *longRun) { r.longs[0].attempts = 2 },
		"no attempts":    func(r *longRun) { r.longs[0].attempts = 0 },
		"silent":         func(r *longRun) { r.longs[0].silence = ms(3100) },
		"failed":         func(r *longRun) { r.longs[0].err = errNoDone },
		"blamed":         func(r *longRun) { r.unwell = []string{"127.0.0.1:1 breaker open"} },
		"short failed":   func(r *longRun) { r.with[3].err = errNoDone },
		"TTFT over goal": func(r *longRun) { r.with = shorts(ms(201)) },
	} {
		r := good()
		spoil(r)
		if err := checkLong(r, true); err == nil {
			t.Errorf("%s: no error", name)
		}
		if err := checkLong(r, false); (err == nil) != (name == "TTFT over goal") {
			t.Errorf("%s without -check: %v", name, err)
		}
	}
}
