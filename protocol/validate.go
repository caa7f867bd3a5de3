package protocol

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// MaxN bounds n, the number of choices a request asks for. It is OpenAI's
// bound: every choice is a sequence the fleet decodes, so n multiplies the
// cost of a request.
const MaxN = 128

// Validate checks the fields of a client's completion request the way
// MLC-LLM and OpenAI do, returning a 400 error that names the first bad
// field (param) and says what is allowed.
func (r *CompletionRequest) Validate() *Error { return r.validate(MaxCompletionLogprobs) }

// ValidateForEngine checks a completion request an engine serves: Validate,
// except that logprobs may go up to MaxChatTopLogprobs. A router drives
// its engines through completion requests, and the one that answers a chat
// request asks for the chat's top_logprobs, which OpenAI and MLC bound at
// 20, not 5 (MLC's engine serves a chat's top_logprobs up to 20 the same
// way, through its generation config).
func (r *CompletionRequest) ValidateForEngine() *Error { return r.validate(MaxChatTopLogprobs) }

func (r *CompletionRequest) validate(maxLogprobs int) *Error {
	if e := r.validatePrompt(); e != nil {
		return e
	}
	if e := r.Sampling().Validate(); e != nil {
		return e
	}
	if e := intRange("logprobs", r.Logprobs, 0, maxLogprobs); e != nil {
		return e
	}
	if e := validateStreamOptions(r.Stream, r.StreamOptions); e != nil {
		return e
	}
	if r.ResponseFormat != nil {
		rf, e := r.ResponseFormat.EngineFor("response_format", r.Grammar)
		if e != nil {
			return e
		}
		if rf != nil {
			rf.ResumedTokens = r.ResponseFormat.ResumedTokens
		}
		r.ResponseFormat = rf
	}
	return r.DebugConfig.Validate()
}

func (r *CompletionRequest) validatePrompt() *Error {
	p := r.Prompt
	switch {
	case p.IsText && p.Text == "":
		return InvalidRequest("prompt", "prompt is required and must not be empty").WithCode(CodeInvalidValue)
	case !p.IsText && p.IDs == nil:
		return InvalidRequest("prompt", "prompt is required and must not be empty: a string or an array of token ids").WithCode(CodeMissingParameter)
	case !p.IsText && len(p.IDs) == 0:
		return InvalidRequest("prompt", "prompt is required and must not be empty, got an empty array of token ids").WithCode(CodeEmptyArray)
	}
	for i, id := range p.IDs {
		if id < 0 {
			return InvalidRequest(fmt.Sprintf("prompt[%d]", i), "prompt[%d]: token id %d is negative", i, id).WithCode(CodeIntegerBelowMin)
		}
	}
	return nil
}

func validateStreamOptions(stream bool, so *StreamOptions) *Error {
	if so != nil && !stream {
		return InvalidRequest("stream_options", "stream_options is only allowed when stream is true").WithCode(CodeInvalidValue)
	}
	return nil
}

// Sampling are the generation parameters shared by the completion and chat
// APIs.
type Sampling struct {
	MaxTokens *int
	// MaxTokensParam names MaxTokens in errors: "max_tokens" when empty
	// (chat requests may name it max_completion_tokens).
	MaxTokensParam   string
	N                *int
	BestOf           *int
	FrequencyPenalty *float64
	PresencePenalty  *float64
	Temperature      *float64
	TopP             *float64
	LogitBias        map[string]float64
	Stop             StopList
}

// Sampling returns the request's generation parameters.
func (r *CompletionRequest) Sampling() Sampling {
	return Sampling{
		MaxTokens: r.MaxTokens, N: r.N, BestOf: r.BestOf, FrequencyPenalty: r.FrequencyPenalty,
		PresencePenalty: r.PresencePenalty, Temperature: r.Temperature, TopP: r.TopP,
		LogitBias: r.LogitBias, Stop: r.Stop,
	}
}

// Validate checks the ranges of the parameters: those of OpenAI's API
// reference, which MLC-LLM's protocol models check too (penalties, logit
// bias) or its samplers assume (temperature, top_p). NaN and infinities
// are out of every range; they cannot come from JSON, but a Go caller may
// build a request.
func (s Sampling) Validate() *Error {
	maxTokens := s.MaxTokensParam
	if maxTokens == "" {
		maxTokens = "max_tokens"
	}
	if e := intRange(maxTokens, s.MaxTokens, 1, math.MaxInt); e != nil {
		return e
	}
	if e := intRange("n", s.N, 1, MaxN); e != nil {
		return e
	}
	// MLC-LLM answers best_of other than 1 as an unsupported field: each
	// choice is returned, none is picked as the best.
	if s.BestOf != nil && *s.BestOf != 1 {
		return InvalidRequest("best_of", "best_of must be 1 (choosing the best of several sequences is not supported; ask for n choices instead), got %d", *s.BestOf).WithCode(CodeUnsupportedValue)
	}
	for _, c := range []struct {
		param  string
		v      *float64
		lo, hi float64
		loOpen bool
	}{
		{"frequency_penalty", s.FrequencyPenalty, -2, 2, false},
		{"presence_penalty", s.PresencePenalty, -2, 2, false},
		{"temperature", s.Temperature, 0, 2, false},
		{"top_p", s.TopP, 0, 1, true},
	} {
		if e := decimalRange(c.param, c.v, c.lo, c.hi, c.loOpen); e != nil {
			return e
		}
	}
	if e := validateLogitBias(s.LogitBias); e != nil {
		return e
	}
	return s.Stop.Validate()
}

// MaxLogitBias bounds the magnitude of a logit_bias value, as OpenAI and
// MLC-LLM do: ±100 already bans or forces a token.
const MaxLogitBias = 100

// validateLogitBias checks that every key is a token id and every bias is
// in [-100, 100]. Keys are checked in order so that the error is the same
// for the same request.
func validateLogitBias(bias map[string]float64) *Error {
	keys := make([]string, 0, len(bias))
	for k := range bias {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := ParseTokenID(k); !ok {
			return InvalidRequest("logit_bias", "logit_bias key %q is not a token id (a decimal integer in [0, %d], no sign or leading zeros)", k, math.MaxInt32).WithCode(CodeInvalidValue)
		}
		// The message names the key; the param is the field, as OpenAI's.
		if e := decimalRange("logit_bias["+k+"]", new(bias[k]), -MaxLogitBias, MaxLogitBias, false); e != nil {
			e.Param = new("logit_bias")
			return e
		}
	}
	return nil
}

// ParseTokenID reads a logit_bias key: a token id written in decimal,
// without sign or leading zeros, so that two keys never name the same
// token, and small enough for any vocabulary's int32 ids.
func ParseTokenID(s string) (int, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.Atoi(s)
	if err != nil || id > math.MaxInt32 {
		return 0, false
	}
	return id, true
}

// intRange checks that an optional integer is in [lo, hi].
func intRange(param string, v *int, lo, hi int) *Error {
	switch {
	case v == nil:
		return nil
	case *v < lo:
		return InvalidRequest(param, "%s must be at least %d, got %d", param, lo, *v).WithCode(CodeIntegerBelowMin)
	case *v > hi:
		return InvalidRequest(param, "%s must be at most %d, got %d", param, hi, *v).WithCode(CodeIntegerAboveMax)
	}
	return nil
}

// decimalRange checks that an optional number is in [lo, hi], or (lo, hi]
// when loOpen.
func decimalRange(param string, v *float64, lo, hi float64, loOpen bool) *Error {
	if v == nil {
		return nil
	}
	x := *v
	// The interval is written only for an error: every request checks
	// its sampling numbers.
	interval := func() string {
		if loOpen {
			return fmt.Sprintf("(%v, %v]", lo, hi)
		}
		return fmt.Sprintf("[%v, %v]", lo, hi)
	}
	switch {
	case math.IsNaN(x):
		return InvalidRequest(param, "%s must be a number in %s, got NaN", param, interval()).WithCode(CodeInvalidValue)
	case x < lo || (loOpen && x == lo):
		return InvalidRequest(param, "%s must be in %s, got %v", param, interval(), x).WithCode(CodeDecimalBelowMin)
	case x > hi:
		return InvalidRequest(param, "%s must be in %s, got %v", param, interval(), x).WithCode(CodeDecimalAboveMax)
	}
	return nil
}
