package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

var chunkSamples = []struct {
	data    string
	scanned bool // the scanner reads it (else encoding/json must)
}{
	{`{"id":"cmpl-1","object":"text_completion","created":1796049071,"model":"tiny","choices":[{"index":0,"text":" push","finish_reason":null,"logprobs":null}]}`, true},
	{`{"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":2,"text":"","finish_reason":"length","logprobs":null}]}`, true},
	{` { "choices" : [ ] , "usage" : null } `, true},
	{`{"choices":[{"index":0,"text":"a"},{"index":1,"text":"b","finish_reason":"stop"}]}`, true},
	{`{}`, true},
	{`{"choices":[{"index":0,"text":"line\nbreak"}]}`, false},  // an escape
	{`{"choices":[{"index":0,"text":"é ok"}]}`, true},          // UTF-8 as is
	{"{\"choices\":[{\"index\":0,\"text\":\"\xff\"}]}", false}, // invalid UTF-8: encoding/json replaces it
	{`{"choices":[{"index":0,"text":"x","logprobs":{"tokens":["x"],"token_logprobs":[-1],"top_logprobs":[{}],"text_offset":[0]}}]}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, true},
	{`{"id":"cmpl-b","object":"text_completion","created":1,"model":"tiny","choices":[{"index":0,"text":" a b","finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":8,"completion_tokens":16,"total_tokens":24,"extra":{"prefix_matched_length":0,"prompt_length":8}}}`, true},
	{`{"usage":{"extra":{ "k" : "v" , "n":-3}}}`, true},
	{`{"usage":{"extra":{}}}`, true},
	{`{"usage":{"extra":null}}`, true},
	{`{"usage":{"extra":null,"extra":{"a":1}}}`, true},
	{`{"usage":{"extra":{"a":1},"extra":{"b":2}}}`, false}, // encoding/json merges the two
	{`{"usage":{"prompt_tokens":1},"usage":{"total_tokens":2}}`, false},
	{`{"usage":null,"usage":{"total_tokens":2}}`, true},
	{`{"usage":{"extra":{"m":{"x":1}}}}`, false},
	{`{"usage":{"extra":{"f":1.5}}}`, false},
	{`{"usage":{"extra":{"s":"a\"b"}}}`, false},
	{`{"usage":{"Prompt_tokens":1}}`, false},
	{`{"usage":{"prompt_tokens":1.0}}`, false},
	{`{"error":{"message":"boom","type":"server_error"}}`, false},
	{`{"Choices":[{"index":0,"text":"case"}]}`, false}, // encoding/json matches keys without case
	{`{"choices":[{"index":1.5,"text":"x"}]}`, false},
	{`{"choices":[{"index":01,"text":"x"}]}`, false},
	{`{"created":99999999999999999999999}`, false},
	{`{"choices":[{"index":0,"text":"x"}]} trailing`, false},
	{`{"choices":[{"index":0,"text":"x","extra":1}]}`, false},
	{`{"id":"a","id":"b","choices":[{"index":0,"text":"dup"}]}`, true},
}

// The scanner reads the common chunks, and whatever it reads, encoding/json
// reads to the same value.
func TestScanCompletionChunk(t *testing.T) {
	for _, c := range chunkSamples {
		var got CompletionResponse
		scanned := ScanCompletionChunk([]byte(c.data), &got)
		if scanned != c.scanned {
			t.Errorf("%s: scanned %v, want %v", c.data, scanned, c.scanned)
		}
		if scanned {
			agreeWithJSON(t, []byte(c.data), got)
		}
	}
}

// A chunk's id, object and model equal to the previous chunk's are that
// chunk's strings, not new ones, and its choices are written over the
// previous chunk's array; different strings are read as they are.
func TestScanCompletionChunkReusesStrings(t *testing.T) {
	data := []byte(`{"id":"cmpl-1","object":"text_completion","model":"tiny","choices":[{"index":0,"text":"a"}]}`)
	var c CompletionResponse
	if !ScanCompletionChunk(data, &c) {
		t.Fatal("not scanned")
	}
	prev := c
	if allocs := testing.AllocsPerRun(100, func() {
		ScanCompletionChunk(data, &c)
	}); allocs > 1 { // the text
		t.Errorf("%v allocations per chunk of the same stream", allocs)
	}
	if unsafe.StringData(c.ID) != unsafe.StringData(prev.ID) || c.Model != "tiny" {
		t.Errorf("id %q not reused", c.ID)
	}
	if unsafe.SliceData(c.Choices) != unsafe.SliceData(prev.Choices) || len(c.Choices) != 1 || c.Choices[0].Text != "a" {
		t.Errorf("choices %+v not written over the previous array", c.Choices)
	}
	other := []byte(`{"id":"cmpl-2","object":"text_completion","model":"big","choices":[]}`)
	if !ScanCompletionChunk(other, &c) || c.ID != "cmpl-2" || c.Model != "big" || c.Object != "text_completion" {
		t.Errorf("a different chunk read as %+v", c)
	}
}

func agreeWithJSON(t *testing.T, data []byte, got CompletionResponse) {
	t.Helper()
	var want CompletionResponse
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: the scanner read what encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nscanned %#v\njson    %#v", data, got, want)
	}
}

func FuzzScanCompletionChunk(f *testing.F) {
	for _, c := range chunkSamples {
		f.Add([]byte(c.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got CompletionResponse
		if ScanCompletionChunk(data, &got) {
			agreeWithJSON(t, data, got)
		}
		// Read after another chunk, whose strings and choices it reuses.
		var after CompletionResponse
		ScanCompletionChunk([]byte(chunkSamples[0].data), &after)
		if ScanCompletionChunk(data, &after) {
			agreeWithJSON(t, data, after)
		}
	})
}

func BenchmarkChunkDecode(b *testing.B) {
	data := []byte(`{"id":"cmpl-ed06e78744643b7179ff7940","object":"text_completion","created":1796049071,"model":"tiny","choices":[{"index":0,"text":" push","finish_reason":null,"logprobs":null}]}`)
	b.Run("scan", func(b *testing.B) {
		var c CompletionResponse
		for b.Loop() {
			ScanCompletionChunk(data, &c)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var c CompletionResponse
			_ = json.Unmarshal(data, &c)
		}
	})
}
