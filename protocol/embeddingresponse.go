package protocol

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// ObjectEmbedding is the object name of one embedding of an answer.
const ObjectEmbedding = "embedding"

// EmbeddingResponse is the answer of POST /v1/embeddings, MLC's (and
// OpenAI's) EmbeddingResponse.
type EmbeddingResponse struct {
	Object string         `json:"object"` // "list"
	Data   []Embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  EmbeddingUsage `json:"usage"`
}

// Embedding is the vector of one input.
type Embedding struct {
	Object    string          `json:"object"` // "embedding"
	Embedding EmbeddingVector `json:"embedding"`
	// Index is the input's position in the request.
	Index int `json:"index"`
}

// EmbeddingUsage counts the tokens embedded: those of every input, with
// what the model adds to each (MLC counts them so).
type EmbeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// EmbeddingVector is a vector as the answer carries it: an array of
// numbers, or, for encoding_format "base64", the base64 (standard
// alphabet, padded) of its float32 values in little-endian order, as
// OpenAI and MLC (struct.pack("<Nf")) write it.
type EmbeddingVector struct {
	Floats []float32
	// Base64 reports whether the vector is written as base64.
	Base64 bool
}

// MarshalJSON writes the vector. A float is written as encoding/json
// writes the float64 of the same value, as MLC's server writes it (a
// Python float holding the float32): it reads back as that float64, and
// as exactly the float32 once rounded to one.
func (v EmbeddingVector) MarshalJSON() ([]byte, error) {
	if v.Base64 {
		return AppendJSONString(nil, EncodeEmbeddingBase64(v.Floats)), nil
	}
	b := make([]byte, 0, 2+len(v.Floats)*12)
	b = append(b, '[')
	for i, f := range v.Floats {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("embedding value %d is %v", i, f)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONFloat(b, float64(f))
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads an array of numbers or a base64 string.
func (v *EmbeddingVector) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		f, err := DecodeEmbeddingBase64(s)
		*v = EmbeddingVector{Floats: f, Base64: true}
		return err
	}
	var fs []float64
	if err := json.Unmarshal(b, &fs); err != nil {
		return err
	}
	*v = EmbeddingVector{Floats: make([]float32, len(fs))}
	for i, f := range fs {
		v.Floats[i] = float32(f)
	}
	return nil
}

// EncodeEmbeddingBase64 is the base64 of v's float32 values, little-endian.
func EncodeEmbeddingBase64(v []float32) string {
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// DecodeEmbeddingBase64 reads what EncodeEmbeddingBase64 writes.
func DecodeEmbeddingBase64(s string) ([]float32, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("embedding: %w", err)
	}
	if len(raw)%4 != 0 {
		return nil, fmt.Errorf("embedding: %d bytes are not a whole number of float32 values", len(raw))
	}
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v, nil
}

// minEmbeddingNorm is the norm at or under which MLC leaves a vector as
// it is rather than divide by it.
const minEmbeddingNorm float64 = 1e-12

// NormalizeEmbedding scales v in place to unit L2 length, as MLC does
// (its engine's pooled vectors, its server's truncated ones): in float32,
// v / norm, unless the norm is at most 1e-12 (a zero vector stays zero).
// The sum of squares is taken in float64, where numpy's float32 dot
// product sums in an order of its BLAS's choosing: the norm may differ
// from MLC's in its last bit, never more.
func NormalizeEmbedding(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	norm := float32(math.Sqrt(sum))
	if float64(norm) <= minEmbeddingNorm {
		return
	}
	for i := range v {
		v[i] /= norm
	}
}

// TruncateEmbedding returns the first d values of v, renormalised to
// unit length (NormalizeEmbedding), as MLC's server applies dimensions
// (Matryoshka truncation). v is not modified. d must be at least 1;
// beyond len(v) the whole vector is renormalised, as MLC's slice does.
func TruncateEmbedding(v []float32, d int) []float32 {
	out := make([]float32, min(d, len(v)))
	copy(out, v)
	NormalizeEmbedding(out)
	return out
}

// NewEmbeddingResponse answers req with one vector per input, in order:
// each truncated to req.Dimensions if set, written as floats or base64 as
// req asks, under model's name; tokens is the usage. The vectors are not
// modified.
func NewEmbeddingResponse(req *EmbeddingRequest, model string, vectors [][]float32, tokens int) *EmbeddingResponse {
	resp := &EmbeddingResponse{Object: "list", Data: make([]Embedding, len(vectors)), Model: model,
		Usage: EmbeddingUsage{PromptTokens: tokens, TotalTokens: tokens}}
	for i, v := range vectors {
		if req.Dimensions != nil {
			v = TruncateEmbedding(v, *req.Dimensions)
		}
		resp.Data[i] = Embedding{Object: ObjectEmbedding, Index: i, Embedding: EmbeddingVector{Floats: v, Base64: req.Base64()}}
	}
	return resp
}
