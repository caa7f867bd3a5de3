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
	rows, err := parseTable(out.String(), []string{"row", "turn", "TTFT p50 ms", "TTFT p99 ms", "cached share", "ideal share", "prompt tokens computed"})
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

// -agents-size changes the shape's fields it names and refuses what it
// cannot read; -agents-rows picks rows by name, in the run's order, and
// refuses a name that is no row's. The engines' KV holds the shared head
// and a third of the sessions at their longest, with room for a turn.
func TestAgentsSizeAndRows(t *testing.T) {
	s, err := fullAgents.resized("sessions=12,shared=1500,toolmax=2s")
	if err != nil {
		t.Fatal(err)
	}
	want := fullAgents
	want.sessions, want.sharedHead, want.toolMax = 12, 1500, 2e9
	if s != want {
		t.Errorf("resized: %+v, want %+v", s, want)
	}
	for _, bad := range []string{"sessions=0", "heads=3", "turns=x", "toolmin=3s,toolmax=1s"} {
		if _, err := fullAgents.resized(bad); err == nil {
			t.Errorf("-agents-size %q: no error", bad)
		}
	}
	rows, err := pickAgentRows("replicas-3/prefix_aware,whole/least_loaded")
	if err != nil || len(rows) != 2 || rows[0].name != "whole/least_loaded" || rows[1].replicas != 3 {
		t.Errorf("pickAgentRows: %v, %v", rows, err)
	}
	if _, err := pickAgentRows("whole/random"); err == nil {
		t.Error("-agents-rows whole/random: no error")
	}
	session := fullAgents.ownHead + (fullAgents.turns-1)*fullAgents.toolResult + fullAgents.generate
	if kv := fullAgents.kvTokens(); kv < fullAgents.sharedHead+8*session || kv > fullAgents.sharedHead+9*session || kv%16 != 0 {
		t.Errorf("kvTokens %d: want the head and 8 of 24 sessions (%d tokens each), in pages of 16", kv, session)
	}
}
