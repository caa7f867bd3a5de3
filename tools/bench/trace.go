package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A request trace in the Mooncake format (kvcache-ai/Mooncake's
// FAST25-release traces): one JSON object a line, timestamp (ms from the
// start), input_length and output_length (tokens), hash_ids (the
// prompt's blocks of traceBlock tokens: equal ids are equal blocks, the
// last one may be partial). A replay builds each block's token ids from
// its id alone, so requests share exactly the prefixes the trace says.

// traceBlock is the tokens of one of a trace's blocks.
const traceBlock = 512

// traceRequest is one line of a trace.
type traceRequest struct {
	at       time.Duration // since the trace's (or its window's) start
	in, out  int           // prompt and output tokens
	hashIDs  []int64
	lineNo   int
	tooLong  bool // longer than the engines' context: left out of a replay
	reusable int  // prompt tokens an infinite cache would hold (oracleShares)
}

// traceLine is a line as the file spells it.
type traceLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// readTrace reads a trace file, in time order (a file's lines may tie
// or step back: they are sorted, stably).
func readTrace(path string) ([]traceRequest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []traceRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		r, err := parseTraceLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		r.lineNo = n
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no requests", path)
	}
	slices.SortStableFunc(out, func(a, b traceRequest) int { return int(a.at - b.at) })
	return out, nil
}

// parseTraceLine checks one line: every field there, lengths positive,
// and the blocks those of the prompt (its length within the last one).
func parseTraceLine(line string) (traceRequest, error) {
	var l traceLine
	dec := json.NewDecoder(strings.NewReader(line))
	if err := dec.Decode(&l); err != nil {
		return traceRequest{}, fmt.Errorf("not a trace line: %w", err)
	}
	switch {
	case l.Timestamp == nil || l.InputLength == nil || l.OutputLength == nil || l.HashIDs == nil:
		return traceRequest{}, fmt.Errorf("want timestamp, input_length, output_length and hash_ids")
	case *l.Timestamp < 0 || *l.InputLength < 1 || *l.OutputLength < 1:
		return traceRequest{}, fmt.Errorf("timestamp %v, input_length %d, output_length %d: want a timestamp of 0 or more and lengths of 1 or more", *l.Timestamp, *l.InputLength, *l.OutputLength)
	case *l.InputLength > len(l.HashIDs)*traceBlock || *l.InputLength <= (len(l.HashIDs)-1)*traceBlock:
		return traceRequest{}, fmt.Errorf("input_length %d does not end in the last of %d blocks of %d tokens", *l.InputLength, len(l.HashIDs), traceBlock)
	}
	return traceRequest{at: time.Duration(*l.Timestamp * float64(time.Millisecond)), in: *l.InputLength, out: *l.OutputLength, hashIDs: l.HashIDs}, nil
}

// traceWindow is the part of a trace a replay takes: [from, to) of its
// time, to 0 for its end.
type traceWindow struct{ from, to time.Duration }

// parseTraceWindow reads "D" (the first D) or "A-B" (from A to B), each a
// Go duration ("90s", "5m").
func parseTraceWindow(s string) (traceWindow, error) {
	if s == "" {
		return traceWindow{}, nil
	}
	a, b, ranged := strings.Cut(s, "-")
	if !ranged {
		a, b = "0s", a
	}
	from, err1 := time.ParseDuration(a)
	to, err2 := time.ParseDuration(b)
	if err1 != nil || err2 != nil || from < 0 || to <= from {
		return traceWindow{}, fmt.Errorf("-trace-window %q: want D or A-B, durations with A < B (5m, 2m-4m)", s)
	}
	return traceWindow{from, to}, nil
}

// take returns the requests of the window, their times from its start.
func (w traceWindow) take(reqs []traceRequest) []traceRequest {
	var out []traceRequest
	for _, r := range reqs {
		if r.at < w.from || w.to > 0 && r.at >= w.to {
			continue
		}
		r.at -= w.from
		out = append(out, r)
	}
	return out
}

// oracleShares sets each request's reusable tokens, what an infinite
// prefix cache that had seen every request before it would hold of its
// prompt: its leading blocks seen before as a prefix (a block counts as
// far as an earlier request had it; the rest of the prompt after a block
// seen partly is new), at most all but the last token (an engine
// computes that one for its logits). It returns the share of all prompt
// tokens.
func oracleShares(reqs []traceRequest) float64 {
	seen := map[string]int{} // a prefix of blocks → the most tokens of its last block seen
	var reused, total int
	var key strings.Builder
	for i := range reqs {
		r := &reqs[i]
		key.Reset()
		held, full := 0, true
		for b, id := range r.hashIDs {
			key.WriteString(strconv.FormatInt(id, 36))
			key.WriteByte(',')
			n := min(traceBlock, r.in-b*traceBlock)
			k := key.String()
			if full {
				got := min(seen[k], n)
				held += got
				full = got == n
			}
			seen[k] = max(seen[k], n)
		}
		r.reusable = min(held, r.in-1)
		reused += r.reusable
		total += r.in
	}
	return float64(reused) / float64(max(total, 1))
}

// prompt is the request's prompt: each block's tokens drawn from its
// hash id alone, the last block cut to the prompt's length.
func (r *traceRequest) prompt(vocab []int) []int {
	out := make([]int, 0, r.in)
	for b, id := range r.hashIDs {
		rng := rand.New(rand.NewPCG(uint64(id), 0x6d6f6f6e63616b65))
		for range min(traceBlock, r.in-b*traceBlock) {
			out = append(out, vocab[rng.IntN(len(vocab))])
		}
	}
	return out
}
