package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

// The embeddings API, POST /v1/embeddings, as MLC-LLM's server reads it
// (EmbeddingRequest in openai_api_protocol.py, request_embedding in
// openai_entrypoints.py) within OpenAI's bounds; see the package
// documentation for how a server puts its pieces together.

// Encoding formats of an embedding.
const (
	EncodingFloat  = "float"
	EncodingBase64 = "base64"
)

// MaxEmbeddingInputs bounds the inputs of one request: OpenAI's bound of
// an input array (MLC's server has none).
const MaxEmbeddingInputs = 2048

// EmbeddingRequest is the body of POST /v1/embeddings.
type EmbeddingRequest struct {
	Input EmbeddingInput `json:"input"`
	// Model names the embedding model. MLC's server, which serves at most
	// one, reads it only to echo it in the answer.
	Model string `json:"model,omitempty"`
	// EncodingFormat is "float" (the default) or "base64".
	EncodingFormat string `json:"encoding_format,omitempty"`
	// Dimensions, when set, truncates each vector to its first
	// Dimensions values, renormalised to unit length (TruncateEmbedding).
	Dimensions *int    `json:"dimensions,omitempty"`
	User       *string `json:"user,omitempty"`

	// Extra holds the fields this type does not model; they are written
	// back when the request is encoded.
	Extra Extra `json:"-"`
}

// embeddingRequestFields is EmbeddingRequest without its JSON methods.
type embeddingRequestFields EmbeddingRequest

// UnmarshalJSON decodes the request, keeping unknown fields in Extra.
func (r *EmbeddingRequest) UnmarshalJSON(b []byte) error {
	return decodeExtra(b, (*embeddingRequestFields)(r), &r.Extra)
}

// MarshalJSON encodes the request with its unknown fields.
func (r EmbeddingRequest) MarshalJSON() ([]byte, error) {
	return joinExtra(embeddingRequestFields(r), r.Extra)
}

// Base64 reports whether the request asks for base64 vectors.
func (r *EmbeddingRequest) Base64() bool { return r.EncodingFormat == EncodingBase64 }

// EmbeddingInput is what to embed, written as MLC and OpenAI take it: a
// string, an array of strings, an array of token ids (one input), or an
// array of arrays of token ids.
type EmbeddingInput struct {
	// Items are the inputs in order, each a text or a list of token ids.
	// Empty texts and empty id lists are inputs too: MLC embeds what its
	// model adds to them (an encoder's [CLS] [SEP], a decoder's EOS).
	Items []Prompt
	// List reports whether the input was an array of inputs (["a", "b"],
	// [[1, 2]]) rather than one input ("a", [1, 2]).
	List bool
}

// Len is the number of inputs.
func (in EmbeddingInput) Len() int { return len(in.Items) }

// Param names input i in errors: "input" for a single input, "input[i]"
// for an element of an array of inputs.
func (in EmbeddingInput) Param(i int) string {
	if !in.List {
		return "input"
	}
	return "input[" + strconv.Itoa(i) + "]"
}

// errEmbeddingInput is the error of an input of none of its shapes.
var errEmbeddingInput = &fieldError{param: "input",
	msg: "input must be a string, an array of strings, an array of token ids (integers), or an array of arrays of token ids"}

// UnmarshalJSON reads the four shapes; null (like an absent input) leaves
// no items, which Validate refuses. An array takes its shape from its first
// element, and every other element must have the same.
func (in *EmbeddingInput) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*in = EmbeddingInput{}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var p Prompt
		if err := p.UnmarshalJSON(b); err != nil {
			return errEmbeddingInput
		}
		in.Items = []Prompt{p}
		return nil
	}
	if len(b) == 0 || b[0] != '[' {
		return errEmbeddingInput
	}
	first := bytes.TrimLeft(b[1:], " \t\r\n")
	switch {
	case len(first) == 0:
		return errEmbeddingInput
	case first[0] == ']':
		*in = EmbeddingInput{Items: []Prompt{}, List: true}
	case first[0] == '"':
		var texts []*string // a null element is no string
		if err := json.Unmarshal(b, &texts); err != nil {
			return errEmbeddingInput
		}
		in.Items, in.List = make([]Prompt, len(texts)), true
		for i, t := range texts {
			if t == nil {
				return errEmbeddingInput
			}
			in.Items[i] = Prompt{Text: *t, IsText: true}
		}
	case first[0] == '[':
		var lists []json.RawMessage
		if err := json.Unmarshal(b, &lists); err != nil {
			return errEmbeddingInput
		}
		in.Items, in.List = make([]Prompt, len(lists)), true
		for i, l := range lists {
			if ids, ok := tokenIDs(l); ok {
				in.Items[i] = Prompt{IDs: ids}
				continue
			}
			return errEmbeddingInput
		}
	default:
		ids, ok := tokenIDs(b)
		if !ok {
			return errEmbeddingInput
		}
		in.Items = []Prompt{{IDs: ids}}
	}
	return nil
}

// tokenIDs reads a JSON array of integers (an empty array is an empty,
// non-nil list). scanIDs reads every array that json.Unmarshal reads into
// []int but those with a null, which it would read as 0.
func tokenIDs(b []byte) ([]int, bool) { return scanIDs(b) }

// MarshalJSON writes the input in the shape it was read in.
func (in EmbeddingInput) MarshalJSON() ([]byte, error) {
	if !in.List && len(in.Items) == 1 {
		return in.Items[0].appendJSON(nil), nil
	}
	if !in.List && len(in.Items) == 0 {
		return []byte("null"), nil
	}
	return appendJSONArray(nil, in.Items, func(b []byte, p Prompt) []byte { return p.appendJSON(b) }), nil
}

// Validate checks the request as MLC's model does, within OpenAI's bounds:
// an input (a list of at most MaxEmbeddingInputs, not empty), token ids
// that are not negative, encoding_format "float" or "base64", dimensions
// at least 1. It does not know the model: see CheckDimensions and
// EmbeddingInput.CheckTokens.
func (r *EmbeddingRequest) Validate() *Error {
	in := r.Input
	switch {
	case in.Items == nil:
		return InvalidRequest("input", "input is required: a string, an array of strings, an array of token ids, or an array of arrays of token ids").WithCode(CodeMissingParameter)
	case len(in.Items) == 0:
		return InvalidRequest("input", "input must not be an empty array").WithCode(CodeEmptyArray)
	case len(in.Items) > MaxEmbeddingInputs:
		return InvalidRequest("input", "input must have at most %d items, got %d", MaxEmbeddingInputs, len(in.Items)).WithCode(CodeArrayTooLong)
	}
	for i, p := range in.Items {
		for j, id := range p.IDs {
			if id < 0 {
				param := in.Param(i) + "[" + strconv.Itoa(j) + "]"
				return InvalidRequest(param, "%s: token id %d is negative", param, id).WithCode(CodeIntegerBelowMin)
			}
		}
	}
	switch r.EncodingFormat {
	case "", EncodingFloat, EncodingBase64:
	default:
		return InvalidRequest("encoding_format", `encoding_format must be "float" or "base64", got %q`, r.EncodingFormat).WithCode(CodeInvalidValue)
	}
	return intRange("dimensions", r.Dimensions, 1, math.MaxInt)
}

// CheckDimensions refuses a dimensions larger than the model's vectors,
// which have modelDim values (0: unknown). MLC's server would return the
// whole vector; OpenAI refuses.
func (r *EmbeddingRequest) CheckDimensions(modelDim int) *Error {
	if modelDim <= 0 || r.Dimensions == nil || *r.Dimensions <= modelDim {
		return nil
	}
	return InvalidRequest("dimensions", "dimensions must be at most %d (the model's embedding size), got %d", modelDim, *r.Dimensions).WithCode(CodeIntegerAboveMax)
}

// CheckTokens refuses input i when it has n tokens and the model embeds at
// most limit tokens of one input (0: no limit). MLC's engines cut a
// longer input short; OpenAI refuses it, and so do the router and the
// built-in engine.
func (in EmbeddingInput) CheckTokens(i, n, limit int) *Error {
	if limit <= 0 || n <= limit {
		return nil
	}
	where := ""
	if in.List {
		where = fmt.Sprintf(" for input %d", i)
	}
	return InvalidRequest(in.Param(i), "This model's maximum context length is %d tokens, however you requested %d tokens%s. Please reduce the input.", limit, n, where).
		WithCode(CodeContextLengthExceeded)
}

// DecodeEmbeddingRequest reads, decodes and validates an embeddings
// request body of at most limit bytes (0: DefaultMaxBodyBytes).
func DecodeEmbeddingRequest(r io.Reader, limit int64) (*EmbeddingRequest, *Error) {
	b, e := ReadBody(r, limit)
	if e != nil {
		return nil, e
	}
	var req EmbeddingRequest
	if e := DecodeJSON(b, &req); e != nil {
		return nil, e
	}
	if e := req.Validate(); e != nil {
		return nil, e
	}
	return &req, nil
}
