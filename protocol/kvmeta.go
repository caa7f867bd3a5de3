package protocol

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// KVSegment is a run of consecutive KV slots in an engine's memory.
type KVSegment struct {
	Start  int
	Length int
}

// KVAppendMetadata is the decoded kv_append_metadata: for each model of the
// engine (the main model, then any additional one), the segments of KV slots
// that receive the transferred tokens, in token order.
type KVAppendMetadata [][]KVSegment

// Tokens is the number of tokens the segments of model m hold.
func (m KVAppendMetadata) Tokens(model int) int {
	n := 0
	for _, s := range m[model] {
		n += s.Length
	}
	return n
}

// Encode returns MLC's wire form: base64 of a JSON array of integers,
// [num_segments, start_0, length_0, ...] per model, flattened.
func (m KVAppendMetadata) Encode() string {
	flat := []int{}
	for _, segs := range m {
		flat = append(flat, len(segs))
		for _, s := range segs {
			flat = append(flat, s.Start, s.Length)
		}
	}
	b, _ := json.Marshal(flat)
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeKVAppendMetadata parses MLC's wire form for the given number of
// models. It rejects malformed base64 or JSON, negative or overflowing
// values, and trailing data.
func DecodeKVAppendMetadata(s string, models int) (KVAppendMetadata, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("kv_append_metadata: not base64: %w", err)
	}
	var flat []int
	if err := json.Unmarshal(raw, &flat); err != nil {
		return nil, fmt.Errorf("kv_append_metadata: not a JSON array of integers: %w", err)
	}
	m := make(KVAppendMetadata, 0, models)
	i := 0
	for model := range models {
		if i >= len(flat) {
			return nil, fmt.Errorf("kv_append_metadata: missing segments of model %d", model)
		}
		n := flat[i]
		i++
		if n < 0 || n > (len(flat)-i)/2 {
			return nil, fmt.Errorf("kv_append_metadata: model %d: bad segment count %d", model, n)
		}
		segs := make([]KVSegment, n)
		for j := range segs {
			segs[j] = KVSegment{Start: flat[i], Length: flat[i+1]}
			i += 2
			if segs[j].Start < 0 || segs[j].Length < 0 {
				return nil, fmt.Errorf("kv_append_metadata: model %d: negative segment", model)
			}
		}
		m = append(m, segs)
	}
	if i != len(flat) {
		return nil, fmt.Errorf("kv_append_metadata: %d trailing values", len(flat)-i)
	}
	return m, nil
}
