package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// The short form of the fairness run, end to end: this test binary is
// the caddy (enginetest.Main), which spawns its engines from it too.
// Timing is the benchmark's business; here every request must end well,
// the table must hold every scenario on both routers, and nothing the
// run started may outlive it.
func TestFairnessShortForm(t *testing.T) {
	before := enginetest.Children(t)
	var out bytes.Buffer
	args := []string{"-fairness", "-quick", "-caddy", os.Args[0]}
	if err := run(args, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "`go run ./tools/bench -fairness -quick -caddy ") {
		t.Errorf("the output does not say the command:\n%s", out.String())
	}
	rows, err := parseTable(out.String(), fairColumns)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	cfg, err := parseConfig(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var want [][2]string
	for _, sc := range cfg.scenarios() {
		want = append(want, [2]string{sc.name, "on (16 slots)"}, [2]string{sc.name, "off"})
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out.String())
	}
	for i, row := range rows {
		if row["scenario"] != want[i][0] || row["gate"] != want[i][1] {
			t.Errorf("row %d: %q, gate %q; want %q, %q", i, row["scenario"], row["gate"], want[i][0], want[i][1])
		}
		if row["failures"] != "0" {
			t.Errorf("row %d: %s failures", i, row["failures"])
		}
		if n, err := strconv.Atoi(row["B requests"]); err != nil || n < cfg.samples {
			t.Errorf("row %d: B requests %q, want at least %d", i, row["B requests"], cfg.samples)
		}
		cells := []string{"B TTFT p50 ms", "B TTFT p99 ms"}
		if flooded := i >= 2; flooded {
			if n, err := strconv.Atoi(row["A requests"]); err != nil || n < cfg.samples {
				t.Errorf("row %d: A requests %q, want at least %d", i, row["A requests"], cfg.samples)
			}
			cells = append(cells, "A TTFT p50 ms", "A TTFT p99 ms", "B/A p50")
		}
		for _, c := range cells {
			if v, err := strconv.ParseFloat(row[c], 64); err != nil || !(v > 0) {
				t.Errorf("row %d: %s = %q, want a positive number", i, c, row[c])
			}
		}
	}
	for pid := range enginetest.Children(t) {
		if !before[pid] {
			t.Errorf("process %d outlived the run", pid)
		}
	}
}

// parseTable reads the markdown table whose header row is columns: one
// map per row, by column.
func parseTable(out string, columns []string) ([]map[string]string, error) {
	header := "| " + strings.Join(columns, " | ") + " |"
	_, rest, ok := strings.Cut(out, header+"\n")
	if !ok {
		return nil, errors.New("no table")
	}
	lines := strings.Split(rest, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "| ---") {
		return nil, errors.New("no separator row")
	}
	var rows []map[string]string
	for _, line := range lines[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != len(columns) {
			return nil, errors.New("a row of " + strconv.Itoa(len(cells)) + " cells: " + line)
		}
		row := map[string]string{}
		for i, c := range cells {
			row[columns[i]] = strings.TrimSpace(c)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func TestSaturatedWantsEverySlotTakenAndMoreWaiting(t *testing.T) {
	status := func(waiting int, inFlight ...int64) fleet.ModelStatus {
		st := fleet.ModelStatus{RouterStatus: router.RouterStatus{Gate: router.GateStatus{Waiting: waiting}}}
		for _, n := range inFlight {
			st.Engines = append(st.Engines, fleet.EngineStatus{UpstreamStatus: router.UpstreamStatus{InFlight: n}})
		}
		return st
	}
	for _, c := range []struct {
		st   fleet.ModelStatus
		want bool
	}{
		{status(1, 8, 8), true},     // gate on: the batches full, one waits in the gate
		{status(0, 8, 8), false},    // full, nothing waits
		{status(5, 8, 7), false},    // a slot free
		{status(0, 32, 32), true},   // gate off: the engines queue the rest
		{status(0, 16), false},      // not the fleet of the run
		{status(3, 8, 8, 8), false}, // nor this
	} {
		if got := saturated(c.st); got != c.want {
			t.Errorf("saturated(waiting %d, engines %+v) = %v, want %v", c.st.Gate.Waiting, c.st.Engines, got, c.want)
		}
	}
}

func TestFairVerdict(t *testing.T) {
	goal := fairScenario{name: "A floods", flood: 64, bStreams: 1, goal: goalFairShare}
	res := func(gate bool, b, a time.Duration, failures int) fairResult {
		r := fairResult{scenario: goal, gate: gate, b: tenantFigures{requests: 10, p50: b}, a: tenantFigures{requests: 10, p50: a}, failures: failures}
		if failures > 0 {
			r.firstErr = errors.New("503 Service Unavailable")
		}
		return r
	}
	met, missed, ungated := res(true, 10*time.Millisecond, time.Second, 0), res(true, 500*time.Millisecond, time.Second, 0), res(false, time.Second, time.Second, 0)
	if met.missed() || !missed.missed() || ungated.missed() {
		t.Errorf("missed: met %v, missed %v, gate off %v; want false, true, false", met.missed(), missed.missed(), ungated.missed())
	}
	if err := fairVerdict([]fairResult{met, missed, ungated}, false); err != nil {
		t.Errorf("a missed goal without -check: %v", err)
	}
	if err := fairVerdict([]fairResult{met, missed, ungated}, true); err == nil || !strings.Contains(err.Error(), "0.500×") {
		t.Errorf("a missed goal with -check: %v", err)
	}
	if err := fairVerdict([]fairResult{met, res(false, time.Second, time.Second, 2)}, false); err == nil || !strings.Contains(err.Error(), "2 requests failed") {
		t.Errorf("failed requests without -check: %v", err)
	}
	if line := verdictLine([]fairResult{met, ungated}); line != "Met." {
		t.Errorf("verdict %q", line)
	}
}
