package stopscan

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rebuild testdata/mlc_reference.jsonl by running MLC's StopStrHandler (needs a C++ compiler)")

// refCase is one case of testdata/mlc_reference.jsonl: stop strings and
// token texts (hex: a token may hold part of a character), and what MLC's
// StopStrHandler answered: the ids each Put released, whether the last
// Put completed a stop string, and, if none did, what Finish released.
type refCase struct {
	Stops  []string `json:"stops"`
	Tokens []string `json:"tokens"`
	Puts   [][]int  `json:"puts"`
	Stop   bool     `json:"stop"`
	Finish []int    `json:"finish"`
}

// TestHandlerMatchesMLC replays, token by token, what MLC's own
// StopStrHandler (testdata/stopstr_mlc.cc, the C++ of
// cpp/tokenizers/streamer.cc) answered on the tricky cases of
// trickyCases and on random ones over a small alphabet, where stop
// strings overlap, repeat themselves, share prefixes and span tokens.
func TestHandlerMatchesMLC(t *testing.T) {
	path := filepath.Join("testdata", "mlc_reference.jsonl")
	if *update {
		writeReference(t, path)
	}
	cases := readReference(t, path)
	if len(cases) < 500 {
		t.Fatalf("%d cases in %s", len(cases), path)
	}
	for i, c := range cases {
		stops, tokens := unhexAll(t, c.Stops), unhexAll(t, c.Tokens)
		h := NewHandler(stops)
		next := 0 // the id of the oldest token not yet released
		for j, tok := range tokens {
			if j == len(c.Puts) {
				break
			}
			got := ids(&next, h.Put(tok))
			if !slices.Equal(got, c.Puts[j]) {
				t.Fatalf("case %d %q %q: Put(%d) released %v, MLC %v", i, stops, tokens, j, got, c.Puts[j])
			}
		}
		if h.Triggered() != c.Stop {
			t.Fatalf("case %d %q %q: triggered %v, MLC %v", i, stops, tokens, h.Triggered(), c.Stop)
		}
		if !c.Stop {
			if got := ids(&next, h.Finish()); !slices.Equal(got, c.Finish) {
				t.Fatalf("case %d %q %q: Finish released %v, MLC %v", i, stops, tokens, got, c.Finish)
			}
			continue
		}
		// What was dropped is the rest of the tokens put.
		dropped := 0
		for _, tok := range tokens[next:len(c.Puts)] {
			dropped += len(tok)
		}
		if h.Held() != dropped || h.StopStart() < 0 || h.StopStart() >= max(dropped, 1) {
			t.Fatalf("case %d %q %q: Held %d StopStart %d, want %d dropped bytes holding the start", i, stops, tokens, h.Held(), h.StopStart(), dropped)
		}
	}
}

// ids numbers released pieces by their order of arrival.
func ids(next *int, released []string) []int {
	out := []int{}
	for range released {
		out = append(out, *next)
		*next++
	}
	return out
}

// trickyCases are the cases the reference must cover, as text.
func trickyCases() [][2][]string {
	return [][2][]string{
		{{"ar"}, {" finger", " clothe", " send", " car", "."}},        // the stop starts inside a token: that token goes
		{{"ar"}, {" finger", " clothe", " send", " c", "ar", "."}},    // the stop starts a token: the tokens before it stay
		{{"the end"}, {" it", " was", " the", " e", "nd", " of"}},     // spanning three tokens
		{{"aba"}, {"ab", "ab", "a"}},                                  // overlapping occurrences
		{{"ab", "bc"}, {"a", "bc"}},                                   // two stops overlap: the first to complete wins
		{{"bc", "ab"}, {"a", "bc"}},                                   // the order of the stops does not matter
		{{"abc", "b"}, {"a", "bc"}},                                   // a shorter stop completes first inside a longer one
		{{"ab", "abc"}, {"x", "a", "b", "c"}},                         // a stop that is a prefix of another
		{{"abc", "ab"}, {"x", "abc"}},                                 // the same, in one token
		{{"xab", "ab"}, {"x", "a", "b"}},                              // completing at the same byte: the earlier start wins
		{{"he"}, {"hello", " world"}},                                 // at the very first token
		{{"h"}, {"h"}},                                                // the first token is the stop
		{{"\n\n", "User:", "###"}, {"line", "\n", "\n", "User", ":"}}, // several stops
		{{"\n\n", "User:"}, {"a", "\n", "b", "\n", "c"}},              // partial matches that never complete: all released at the end
		{{"aab"}, {"a", "a", "a", "b"}},                               // KMP falls back
		{{"abab"}, {"ab", "aba", "b"}},                                // falls back inside a token
		{{"x"}, {"", "a", "", "", "b", ""}},                           // empty tokens
		{{"ab"}, {"", "a", "", "b"}},                                  // empty tokens inside a match
		{{"é!"}, {"caf", "\xc3", "\xa9", "!"}},                        // a character split over tokens
		{{"zz"}, {"a", "b", "c"}},                                     // never a match
		{nil, {"a", "b"}},                                             // no stops
		{{"stop"}, {"ss", "sto", "stop", "more"}},                     // restarts
		{{"ab", "cd"}, {"xa", "yc", "d"}},                             // one match dies, another completes
		{{"a"}, {"bbb", "ba", "a"}},                                   // a one-byte stop
		{{"<|im_end|>"}, {" Hi", "<|im_", "end|>", "\n"}},             // a template's stop
		{{"abcab"}, {"abcabcab"}},                                     // completes inside a token, text after it unread
		{{"ab", "b"}, {"ab"}},                                         // same end, the longer starts first
		{{"bcd", "abcde"}, {"abc", "de"}},                             // the inner stop completes first
		{{"END"}, {"x E", "N", "o", " END", " y"}},                    // a broken partial match, then a match
		{{"aa"}, {"a", "a"}},                                          // self-overlapping, two tokens
		{{"aaa"}, {"aa", "aa"}},                                       // self-overlapping, in the middle of a token
		{{"the end", "end"}, {" the", " end"}},                        // the shorter completes with the longer
		{{"\n"}, {"line", "\n"}},                                      // a newline stop
		{{"ab"}, {"a", "a", "a", "b"}},                                // runs of a stop's first byte
		{{"aXa", "Xa"}, {"a", "X", "a"}},                              // completes twice at once
		{{"abc"}, {"a", "", "b", "", "c"}},                            // empty tokens inside a spanning stop
		{{"abcd", "bce"}, {"ab", "c", "e"}},                           // the partial match that releases least wins
		{{"ab"}, {"xa", "c", "a", "b"}},                               // a held token released by a later token
		{{"abc"}, {"ab", "x", "abc"}},                                 // held, released, then stopped
		{{"x", "y"}, {"abx"}},                                         // the only token holds the stop
	}
}

// writeReference builds testdata/stopstr_mlc.cc, runs it on the tricky
// and random cases and writes what it answered to path.
func writeReference(t *testing.T, path string) {
	bin := filepath.Join(t.TempDir(), "stopstr_mlc")
	if out, err := exec.Command("c++", "-std=c++17", "-O1", "-o", bin, filepath.Join("testdata", "stopstr_mlc.cc")).CombinedOutput(); err != nil {
		t.Fatalf("building the reference: %v\n%s", err, out)
	}
	var cases []refCase
	for _, c := range trickyCases() {
		cases = append(cases, refCase{Stops: hexAll(c[0]), Tokens: hexAll(c[1])})
	}
	rng := rand.New(rand.NewPCG(19, 5))
	for range 1000 {
		cases = append(cases, randomCase(rng))
	}
	var in bytes.Buffer
	for _, c := range cases {
		fmt.Fprintf(&in, "case %d %d\n", len(c.Stops), len(c.Tokens))
		for _, s := range append(slices.Clone(c.Stops), c.Tokens...) {
			if s == "" {
				s = "-"
			}
			fmt.Fprintln(&in, s)
		}
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running the reference: %v", err)
	}
	parseAnswers(t, out, cases)
	var b bytes.Buffer
	for _, c := range cases {
		line, _ := json.Marshal(c)
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// randomCase draws 1-3 stop strings of 1-4 bytes and 1-12 tokens of 0-4
// bytes over "ab c", so that stops overlap and recur often.
func randomCase(rng *rand.Rand) refCase {
	word := func(lo, hi int) string {
		b := make([]byte, lo+rng.IntN(hi-lo+1))
		for i := range b {
			b[i] = "ab c"[rng.IntN(4)]
		}
		return string(b)
	}
	var c refCase
	for range 1 + rng.IntN(3) {
		c.Stops = append(c.Stops, hex.EncodeToString([]byte(word(1, 4))))
	}
	for range 1 + rng.IntN(12) {
		c.Tokens = append(c.Tokens, hex.EncodeToString([]byte(word(0, 4))))
	}
	return c
}

// parseAnswers reads the reference's answers into cases.
func parseAnswers(t *testing.T, out []byte, cases []refCase) {
	i := -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch f[0] {
		case "case":
			i++
			cases[i].Puts = [][]int{}
		case "put":
			cases[i].Puts = append(cases[i].Puts, atoiAll(t, f[1:]))
		case "stop":
			cases[i].Stop = true
		case "finish":
			cases[i].Finish = atoiAll(t, f[1:])
		}
	}
	if i != len(cases)-1 {
		t.Fatalf("the reference answered %d cases of %d", i+1, len(cases))
	}
}

func readReference(t *testing.T, path string) []refCase {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []refCase
	for line := range bytes.Lines(b) {
		var c refCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cases = append(cases, c)
	}
	return cases
}

func hexAll(ss []string) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, hex.EncodeToString([]byte(s)))
	}
	return out
}

func unhexAll(t *testing.T, ss []string) []string {
	out := []string{}
	for _, s := range ss {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func atoiAll(t *testing.T, ss []string) []int {
	out := []int{}
	for _, s := range ss {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}
