package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
)

var jsonStrings = []string{"", "plain", " push", "quote \" back \\ slash", "<b>&amp;</b>", "\b\f\n\r\t\x00\x1f\x7f",
	"é ü 中文 😀", "\xff\xfe broken \xc3", "line\u2028sep\u2029", "\"\"\"", "tail\\"}

func TestAppendJSONStringIsMarshal(t *testing.T) {
	for _, s := range jsonStrings {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// The encoder writes what json.Marshal writes, for the completion and the
// chat chunk.
func TestTextChunkEncoderIsMarshal(t *testing.T) {
	completion := func(index int, text string) any {
		return CompletionResponse{ID: "cmpl-x", Object: ObjectTextCompletion, Created: 17, Model: "tiny",
			Choices: []CompletionChoice{{Index: index, Text: text}}}
	}
	chat := func(index int, text string) any {
		return ChatCompletionChunk{ID: "chatcmpl-x", Object: ObjectChatCompletionChunk, Created: 17, Model: "m<odel>",
			SystemFingerprint: SystemFingerprint, Choices: []ChatChunkChoice{{Index: index, Delta: ChatDelta{Role: RoleAssistant, Content: &text}}}}
	}
	for name, sample := range map[string]func(int, string) any{"completion": completion, "chat": chat} {
		enc, err := NewTextChunkEncoder(sample)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range jsonStrings {
			want, _ := json.Marshal(sample(i, s))
			if got := enc.Append(nil, i, s); !bytes.Equal(got, want) {
				t.Errorf("%s %q:\n got  %s\n want %s", name, s, got, want)
			}
		}
	}
	if _, err := NewTextChunkEncoder(func(int, string) any { return map[string]int{"no": 1} }); err == nil {
		t.Error("a sample without index and text was accepted")
	}
}

func BenchmarkTextChunkEncode(b *testing.B) {
	sample := func(index int, text string) any {
		return CompletionResponse{ID: "cmpl-ed06e78744643b7179ff7940", Object: ObjectTextCompletion, Created: 1796049071, Model: "tiny",
			Choices: []CompletionChoice{{Index: index, Text: text}}}
	}
	enc, _ := NewTextChunkEncoder(sample)
	b.Run("encoder", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = enc.Append(buf[:0], 0, " push")
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(sample(0, " push"))
		}
	})
}

// completionSample is a response of the shape flags choose: bit 0 nil
// choices, 1 a finish reason, 2 usage, 3 usage extras, 4 logprobs, 5 a
// second choice.
func completionSample(id, model, text, finish string, index int, created int64, flags byte) *CompletionResponse {
	r := &CompletionResponse{ID: id, Object: ObjectTextCompletion, Created: created, Model: model}
	if flags&1 == 0 {
		c := CompletionChoice{Index: index, Text: text}
		if flags&2 != 0 {
			c.FinishReason = &finish
		}
		if flags&16 != 0 {
			c.Logprobs = &CompletionLogprobs{TextOffset: []int{0}, TokenLogprobs: []float64{-0.25}, Tokens: []string{text}}
		}
		r.Choices = []CompletionChoice{c}
		if flags&32 != 0 {
			r.Choices = append(r.Choices, CompletionChoice{Index: index + 1, Text: finish})
		}
	}
	if flags&4 != 0 {
		r.Usage = &Usage{PromptTokens: index, CompletionTokens: int(created), TotalTokens: index + int(created)}
		if flags&8 != 0 {
			r.Usage.Extra = map[string]json.RawMessage{"prefix_matched_length": json.RawMessage(" 16 "), "b": json.RawMessage(`"x"`)}
		}
	}
	return r
}

func FuzzCompletionResponseAppendJSON(f *testing.F) {
	for i, s := range jsonStrings {
		f.Add("cmpl-1", "tiny", s, "length", i, int64(1796049071), byte(i*7))
	}
	f.Fuzz(func(t *testing.T, id, model, text, finish string, index int, created int64, flags byte) {
		r := completionSample(id, model, text, finish, index, created, flags)
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.AppendJSON([]byte("x"))
		if err != nil || !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("%+v:\n got  %s (%v)\n want %s", r, got, err, want)
		}
	})
}

func TestCompletionResponseAppendJSONIsMarshal(t *testing.T) {
	for flags := range byte(64) {
		for i, s := range jsonStrings {
			r := completionSample("cmpl-<&>", "m\u2028", s, "stop", i, -3, flags)
			want, _ := json.Marshal(r)
			if got, err := r.AppendJSON(nil); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("flags %06b %q:\n got  %s (%v)\n want %s", flags, s, got, err, want)
			}
		}
	}
}
