package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestTopLogprobsKeepsOrder(t *testing.T) {
	in := TopLogprobs{{"b", -0.1}, {"a", -1.5}, {"\"q\"", -2}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":-0.1,"a":-1.5,"\"q\"":-2}`; string(b) != want {
		t.Fatalf("marshal: %s, want %s", b, want)
	}
	var out TopLogprobs
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v, want %v", out, in)
	}
	if err := json.Unmarshal([]byte(`[1]`), &out); err == nil {
		t.Fatal("an array was accepted as top_logprobs")
	}
}

func TestCompletionLogprobsChat(t *testing.T) {
	c := CompletionLogprobs{
		TextOffset: []int{0, 3}, TokenLogprobs: []float64{-0.5, -1}, Tokens: []string{"the", " é"},
		TopLogprobs: []TopLogprobs{{{"the", -0.5}, {"a", -2}}, {{" é", -1}}},
	}
	got := c.Chat()
	want := ChatLogprobs{Content: []ChatTokenLogprob{
		{Token: "the", Logprob: -0.5, Bytes: []int{'t', 'h', 'e'}, TopLogprobs: []ChatTopLogprob{{"the", -0.5, []int{'t', 'h', 'e'}}, {"a", -2, []int{'a'}}}},
		{Token: " é", Logprob: -1, Bytes: []int{' ', 0xc3, 0xa9}, TopLogprobs: []ChatTopLogprob{{" é", -1, []int{' ', 0xc3, 0xa9}}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// The logprobs of a whole choice are its chunks', in order; empty ones are
// written as lists.
func TestCompletionLogprobsAppend(t *testing.T) {
	all := NewCompletionLogprobs(0)
	if b, _ := json.Marshal(all); string(b) != `{"text_offset":[],"token_logprobs":[],"tokens":[],"top_logprobs":[]}` {
		t.Fatalf("empty: %s", b)
	}
	all.Append(&CompletionLogprobs{TextOffset: []int{0}, TokenLogprobs: []float64{-1}, Tokens: []string{"a"}, TopLogprobs: []TopLogprobs{{}}})
	all.Append(nil)
	all.Append(&CompletionLogprobs{TextOffset: []int{1, 2}, TokenLogprobs: []float64{-2, -3}, Tokens: []string{"b", "c"}, TopLogprobs: []TopLogprobs{{}, {{"c", -3}}}})
	want := &CompletionLogprobs{TextOffset: []int{0, 1, 2}, TokenLogprobs: []float64{-1, -2, -3}, Tokens: []string{"a", "b", "c"},
		TopLogprobs: []TopLogprobs{{}, {}, {{"c", -3}}}}
	if !reflect.DeepEqual(all, want) || all.Len() != 3 || (*CompletionLogprobs)(nil).Len() != 0 {
		t.Fatalf("got %+v, want %+v", all, want)
	}
}
