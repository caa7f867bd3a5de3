package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Scripted replies (--replies, for tests only): the pseudo-random model
// never chooses to call a tool nor to end, so a test that drives an agent
// client end to end gives the engine the text to answer instead. See the
// package documentation, "Scripted replies".

// reply is one entry of a --replies file.
type reply struct {
	// Match chooses the entry: it must occur in the prompt part of the
	// context; "" matches every context (a default).
	Match string `json:"match"`
	// Reply is the text the engine answers, then it ends with "stop".
	Reply string `json:"reply"`
}

// loadReplies reads a --replies file: a JSON array of {"match", "reply"}
// objects, each reply non-empty.
func loadReplies(path string) ([]reply, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--replies: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rs []*reply
	if err := dec.Decode(&rs); err != nil {
		return nil, fmt.Errorf("--replies %s: want a JSON array of {\"match\": string, \"reply\": string}: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--replies %s: data after the JSON array", path)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("--replies %s: the array holds no entries", path)
	}
	out := make([]reply, len(rs))
	for i, r := range rs {
		if r == nil || r.Reply == "" {
			return nil, fmt.Errorf("--replies %s: entry %d has an empty reply", path, i)
		}
		out[i] = *r
	}
	return out, nil
}

// script is the part of a chosen reply that a sequence has still to emit.
type script struct {
	ids []int // tokens of the rest of the reply, emitted one per step
}

// chooseReply returns the script that answers the context ids (the
// prompt and any tokens generated so far), or nil when no entry matches
// and the model generates. The context is decoded to text once. For each
// entry, the longest start of its reply that ends the text is taken as
// already generated (k bytes: a request resumed with the text delivered
// so far). The prompt part is the text before the longest of these
// tails, the same for every entry, so that text an earlier answer
// delivered never counts as prompt, and the choice after a resume is the
// choice made before it. An entry matches when its match occurs in the
// prompt part, and the one whose match occurs latest there wins (an
// empty match counts as occurring before every other, a default; a tie
// goes to the earlier entry). What remains of its reply after its own
// tail is tokenized.
func (e *Engine) chooseReply(ids []int) *script {
	if len(e.replies) == 0 {
		return nil
	}
	text := e.tok.Decode(ids)
	tails := make([]int, len(e.replies))
	longest := 0
	for i, r := range e.replies {
		tails[i] = replyOverlap(text, r.Reply)
		longest = max(longest, tails[i])
	}
	prompt := text[:len(text)-longest]
	best, bestAt := -1, -2
	for i, r := range e.replies {
		at := -1 // an empty match: a default, behind any match that occurs
		if r.Match != "" {
			if at = strings.LastIndex(prompt, r.Match); at < 0 {
				continue
			}
		}
		if at > bestAt {
			best, bestAt = i, at
		}
	}
	if best < 0 {
		return nil
	}
	return &script{ids: e.tok.Encode(e.replies[best].Reply[tails[best]:])}
}

// replyOverlap returns the largest k such that text ends with reply[:k],
// in time linear in len(reply): the Knuth-Morris-Pratt automaton of reply
// run over the last len(reply) bytes of text, the only ones such an end
// can span.
func replyOverlap(text, reply string) int {
	if reply == "" {
		return 0
	}
	fail := make([]int, len(reply)) // fail[i]: longest proper border of reply[:i+1]
	for i, k := 1, 0; i < len(reply); i++ {
		for k > 0 && reply[i] != reply[k] {
			k = fail[k-1]
		}
		if reply[i] == reply[k] {
			k++
		}
		fail[i] = k
	}
	k := 0
	for i := max(0, len(text)-len(reply)); i < len(text); i++ {
		if k == len(reply) {
			k = fail[k-1]
		}
		for k > 0 && text[i] != reply[k] {
			k = fail[k-1]
		}
		if text[i] == reply[k] {
			k++
		}
	}
	return k
}
