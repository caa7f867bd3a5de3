package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func writeTraceFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTraceSharesBlocks checks that a replay's prompts share exactly the
// prefixes the trace's hash ids say, a partial block being the start of
// the same id's whole block, and that the oracle share counts what an
// infinite cache would hold.
func TestTraceSharesBlocks(t *testing.T) {
	path := writeTraceFile(t,
		`{"timestamp": 40, "input_length": 2048, "output_length": 3, "hash_ids": [1, 2, 4, 5]}`,
		`{"timestamp": 0, "input_length": 1500, "output_length": 7, "hash_ids": [1, 2, 3]}`,
		`{"timestamp": 90, "input_length": 1200, "output_length": 1, "hash_ids": [1, 2, 3]}`,
		``,
		`{"timestamp": 95, "input_length": 600, "output_length": 1, "hash_ids": [9, 2]}`,
	)
	reqs, err := readTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 4 || reqs[0].in != 1500 || reqs[1].at != 40*time.Millisecond || reqs[0].lineNo != 2 {
		t.Fatalf("read %+v: want the four requests in time order", reqs)
	}
	vocab := promptWords()
	a, b, c, d := reqs[0].prompt(vocab), reqs[1].prompt(vocab), reqs[2].prompt(vocab), reqs[3].prompt(vocab)
	if len(a) != 1500 || len(b) != 2048 || len(c) != 1200 || len(d) != 600 {
		t.Fatalf("prompt lengths %d %d %d %d", len(a), len(b), len(c), len(d))
	}
	if n := common(a, b); n != 2*traceBlock {
		t.Errorf("[1 2 3] and [1 2 4 5] share %d tokens, want %d", n, 2*traceBlock)
	}
	if !slices.Equal(c, a[:1200]) {
		t.Error("[1 2 3] of 1200 tokens is not the start of [1 2 3] of 1500")
	}
	if n := common(a, d); n != 0 {
		t.Errorf("[9 2] shares %d leading tokens with [1 2 3]", n)
	}
	if !slices.Equal(d[traceBlock:], b[traceBlock:traceBlock+88]) {
		t.Error("block 2 is not the same tokens after another first block")
	}
	again, _ := readTrace(path)
	if !slices.Equal(again[1].prompt(vocab), b) {
		t.Error("a prompt is not the same from one read to the next")
	}
	got := oracleShares(reqs)
	want := float64(0+1024+1199+0) / float64(1500+2048+1200+600)
	if math.Abs(got-want) > 1e-9 || reqs[1].reusable != 1024 || reqs[2].reusable != 1199 {
		t.Errorf("oracle share %.4f (reusable %d, %d), want %.4f (1024, 1199)", got, reqs[1].reusable, reqs[2].reusable, want)
	}
}

// common is how many leading tokens a and b share.
func common(a, b []int) int {
	n := 0
	for n < min(len(a), len(b)) && a[n] == b[n] {
		n++
	}
	return n
}

func TestTraceErrorsNameTheLine(t *testing.T) {
	for _, line := range []string{
		`{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1]}`,
		`{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]}`,
		`{"timestamp": 0, "input_length": 10, "hash_ids": [1]}`,
		`{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [1]}`,
		`[1, 2]`,
	} {
		_, err := readTrace(writeTraceFile(t, `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}`, line))
		if err == nil || !strings.Contains(err.Error(), "trace.jsonl:2:") {
			t.Errorf("%s: %v, want an error at line 2", line, err)
		}
	}
	for _, w := range []string{"5", "3m-1m", "x-2m"} {
		if _, err := parseTraceWindow(w); err == nil {
			t.Errorf("window %q accepted", w)
		}
	}
	w, err := parseTraceWindow("1m-2m")
	if err != nil {
		t.Fatal(err)
	}
	reqs := []traceRequest{{at: 30 * time.Second}, {at: 70 * time.Second}, {at: 2 * time.Minute}}
	if got := w.take(reqs); len(got) != 1 || got[0].at != 10*time.Second {
		t.Errorf("window 1m-2m took %+v", got)
	}
}

// TestSharedTrace reads the project's shared trace, where it is: its
// README says 3,993 requests over 17 minutes, and an infinite cache
// reusing 64% of the prompt blocks.
func TestSharedTrace(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "traces", "mooncake-synthetic.jsonl")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no shared trace: %v", err)
	}
	reqs, err := readTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	last := reqs[len(reqs)-1].at
	if len(reqs) != 3993 || last < 16*time.Minute || last > 18*time.Minute {
		t.Fatalf("%d requests over %v", len(reqs), last)
	}
	if share := oracleShares(reqs); share < 0.55 || share > 0.70 {
		t.Errorf("oracle share of prompt tokens %.3f; the README says 64%% of blocks", share)
	}
}
