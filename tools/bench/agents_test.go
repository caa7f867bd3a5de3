package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
)

// The short form of the agent sessions run, end to end: every policy's
// every turn is in the table, each turn after the first finds part of its
// prompt cached, never more than the ideal, and nothing the run started
// outlives it.
func TestAgentsShortForm(t *testing.T) {
	before := enginetest.Children(t)
	var out bytes.Buffer
	if err := run([]string{"-agents", "-quick", "-caddy", os.Args[0]}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rows, err := parseTable(out.String(), []string{"row", "turn", "TTFT p50 ms", "TTFT p99 ms", "cached share", "ideal share"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rows) != len(agentRows)*quickAgents.turns {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(agentRows)*quickAgents.turns, out.String())
	}
	for _, row := range rows {
		cached, err1 := strconv.Atoi(strings.TrimSuffix(row["cached share"], "%"))
		ideal, err2 := strconv.Atoi(strings.TrimSuffix(row["ideal share"], "%"))
		if err1 != nil || err2 != nil || cached > ideal || row["turn"] != "1" && cached == 0 {
			t.Errorf("%s turn %s: cached %q, ideal %q", row["row"], row["turn"], row["cached share"], row["ideal share"])
		}
	}
	for pid := range enginetest.Children(t) {
		if !before[pid] {
			t.Errorf("process %d outlived the run", pid)
		}
	}
}
