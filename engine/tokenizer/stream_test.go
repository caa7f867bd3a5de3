package tokenizer

import (
	"strings"
	"testing"
)

// countingTokenizer decodes id i to the string of byte i (so ids 0x80 and
// up are invalid UTF-8 alone) and counts the ids it decodes.
type countingTokenizer struct{ decoded int }

func (c *countingTokenizer) Encode(string) []int { return nil }
func (c *countingTokenizer) VocabSize() int      { return 256 }

func (c *countingTokenizer) Decode(ids []int) string {
	c.decoded += len(ids)
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return lossyUTF8(b)
}

// TestStreamDecoderCostIsConstantPerToken checks that Push decodes a
// bounded number of ids per token, for text and for a long run of bytes
// that never becomes valid UTF-8, and that characters are still whole.
func TestStreamDecoderCostIsConstantPerToken(t *testing.T) {
	const n = 20000
	for name, ids := range map[string][]int{
		"text":    bytesOf(strings.Repeat("naïve café ", n/12)),
		"garbage": repeatID(0x80, n),
	} {
		tk := &countingTokenizer{}
		sd := NewStreamDecoder(tk)
		var sb strings.Builder
		for _, id := range ids {
			sb.WriteString(sd.Push(id))
		}
		sb.WriteString(sd.Flush())
		if per := float64(tk.decoded) / float64(len(ids)); per > 300 {
			t.Errorf("%s: %.1f ids decoded per token", name, per)
		}
		if name == "text" && sb.String() != tk.Decode(ids) {
			t.Errorf("text: streamed %q..., want %q...", sb.String()[:40], tk.Decode(ids)[:40])
		}
		if name == "garbage" && strings.Count(sb.String(), "\uFFFD") != n {
			t.Errorf("garbage: %d replacement characters, want %d", strings.Count(sb.String(), "\uFFFD"), n)
		}
	}
}

func bytesOf(s string) []int {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(s[i])
	}
	return ids
}

func repeatID(id, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = id
	}
	return ids
}
