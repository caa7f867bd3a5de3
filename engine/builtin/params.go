package builtin

import (
	"slices"
	"strconv"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// genParams are a request's generation settings, resolved.
type genParams struct {
	n           int
	maxTokens   int // -1: none, the context bounds the generation (as MLC's generation config)
	stop        []string
	ignoreEOS   bool
	temperature float64
	topP        float64
	seed        *int64
	presence    float64
	frequency   float64
	logitBias   map[int]float32
	logprobs    bool // answer the logprobs of the generated tokens
	topLogprobs int  // with logprobs: the alternatives of every token
	// format is the response format (nil: text), as protocol's
	// ResponseFormat.Engine writes it.
	format *protocol.ResponseFormat
}

// params resolves the generation settings of req.
func (s *server) params(req *protocol.CompletionRequest) (genParams, *protocol.Error) {
	p := genParams{n: req.NOr(), maxTokens: req.MaxTokensOr(-1), temperature: 1, topP: 1, seed: req.Seed}
	if req.Temperature != nil {
		p.temperature = *req.Temperature
	}
	if req.TopP != nil {
		p.topP = *req.TopP
	}
	if req.PresencePenalty != nil {
		p.presence = *req.PresencePenalty
	}
	if req.FrequencyPenalty != nil {
		p.frequency = *req.FrequencyPenalty
	}
	if req.Logprobs != nil {
		p.logprobs, p.topLogprobs = true, *req.Logprobs
	}
	if req.DebugConfig != nil {
		p.ignoreEOS = req.DebugConfig.IgnoreEOS
	}
	p.stop = s.stops(req.Stop, p.ignoreEOS)
	if req.ResponseFormat != nil {
		f, perr := req.ResponseFormat.Engine("response_format")
		if perr != nil {
			return p, perr
		}
		if f != nil {
			f.ResumedTokens = req.ResponseFormat.ResumedTokens
		}
		p.format = f
	}
	if perr := s.timedRefuses(p); perr != nil {
		return p, perr
	}
	if len(req.LogitBias) > 0 {
		p.logitBias = map[int]float32{}
	}
	for k, v := range req.LogitBias {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= s.e.vocab {
			return p, protocol.InvalidRequest("logit_bias", "logit_bias key %q is not a token id of this model", k)
		}
		p.logitBias[id] = float32(v)
	}
	return p, nil
}

// timedRefuses refuses what a timed engine cannot answer: it computes no
// logits, so neither their log probabilities nor a grammar over them.
// The sampling parameters it ignores (its generator is the text) are
// listed in the package documentation.
func (s *server) timedRefuses(p genParams) *protocol.Error {
	if s.e.timed == nil {
		return nil
	}
	param := ""
	switch {
	case p.logprobs:
		param = "logprobs"
	case p.format != nil:
		param = "response_format"
	default:
		return nil
	}
	return protocol.InvalidRequest(param, "a timed engine (--timing %s) computes no logits: %s is not served", s.e.timed.profile.Name, param).
		WithCode(codeTimedUnsupported)
}

// codeTimedUnsupported is the code of what a timed engine refuses.
const codeTimedUnsupported = "unsupported_by_timed_engine"

// stops returns the stop strings of a request: its own, then the chat
// template's it lacks (a chat's completion, the router's too, carries
// them already), as MLC adds its conversation template's stop_str to
// every request. With debug_config.ignore_eos there are none: MLC's
// engine leaves stop strings out then, as it does EOS (request_state.cc).
func (s *server) stops(req []string, ignoreEOS bool) []string {
	if ignoreEOS {
		return nil
	}
	out := append([]string(nil), req...)
	for _, st := range s.e.tmplStops {
		if !slices.Contains(req, st) {
			out = append(out, st)
		}
	}
	return out
}
