package protocol

import (
	"math"
	"strconv"
)

// Validate checks the fields of a completion request the way MLC-LLM does,
// returning a 400 error that names the first bad field.
func (r *CompletionRequest) Validate() *Error {
	if r.Prompt.Empty() {
		return InvalidRequest("prompt", "prompt is required and must not be empty")
	}
	for i, id := range r.Prompt.IDs {
		if id < 0 {
			return InvalidRequest("prompt", "prompt[%d]: token id %d is negative", i, id)
		}
	}
	if e := r.Sampling().Validate(); e != nil {
		return e
	}
	if r.N != nil && r.BestOf != nil && *r.BestOf < *r.N {
		return InvalidRequest("best_of", "best_of (%d) must be at least n (%d)", *r.BestOf, *r.N)
	}
	if r.Logprobs != nil && (*r.Logprobs < 0 || *r.Logprobs > 20) {
		return InvalidRequest("logprobs", "logprobs must be in [0, 20], got %d", *r.Logprobs)
	}
	if r.StreamOptions != nil && !r.Stream {
		return InvalidRequest("stream_options", "stream_options is only allowed when stream is true")
	}
	if rf := r.ResponseFormat; rf != nil && rf.Type != "text" && rf.Type != "json_object" {
		return InvalidRequest("response_format", `response_format.type must be "text" or "json_object", got %q`, rf.Type)
	}
	return nil
}

// Sampling are the generation parameters shared by the completion and chat
// APIs.
type Sampling struct {
	MaxTokens        *int
	N                *int
	BestOf           *int
	FrequencyPenalty *float64
	PresencePenalty  *float64
	Temperature      *float64
	TopP             *float64
	LogitBias        map[string]float64
}

// Sampling returns the request's generation parameters.
func (r *CompletionRequest) Sampling() Sampling {
	return Sampling{r.MaxTokens, r.N, r.BestOf, r.FrequencyPenalty, r.PresencePenalty, r.Temperature, r.TopP, r.LogitBias}
}

// Validate checks the ranges of the parameters.
func (s Sampling) Validate() *Error {
	if s.MaxTokens != nil && *s.MaxTokens < 1 {
		return InvalidRequest("max_tokens", "max_tokens must be at least 1, got %d", *s.MaxTokens)
	}
	if s.N != nil && *s.N < 1 {
		return InvalidRequest("n", "n must be at least 1, got %d", *s.N)
	}
	if s.BestOf != nil && *s.BestOf < 1 {
		return InvalidRequest("best_of", "best_of must be at least 1, got %d", *s.BestOf)
	}
	if e := penalty("frequency_penalty", s.FrequencyPenalty); e != nil {
		return e
	}
	if e := penalty("presence_penalty", s.PresencePenalty); e != nil {
		return e
	}
	if t := s.Temperature; t != nil && (*t < 0 || math.IsNaN(*t)) {
		return InvalidRequest("temperature", "temperature must be at least 0, got %v", *t)
	}
	if p := s.TopP; p != nil && !(*p > 0 && *p <= 1) {
		return InvalidRequest("top_p", "top_p must be in (0, 1], got %v", *p)
	}
	for tok, bias := range s.LogitBias {
		if id, err := strconv.Atoi(tok); err != nil || id < 0 {
			return InvalidRequest("logit_bias", "logit_bias key %q is not a token id", tok)
		}
		if !(bias >= -100 && bias <= 100) {
			return InvalidRequest("logit_bias", "logit_bias[%s] must be in [-100, 100], got %v", tok, bias)
		}
	}
	return nil
}

func penalty(name string, v *float64) *Error {
	if v != nil && !(*v >= -2 && *v <= 2) {
		return InvalidRequest(name, "%s must be in [-2, 2], got %v", name, *v)
	}
	return nil
}
