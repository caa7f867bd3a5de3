package builtin

import (
	"strconv"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// defaultMaxTokens bounds a generation that sets no max_tokens.
const defaultMaxTokens = 256

// codeContextLength is the error code of a request that does not fit the
// engine's context, as OpenAI names it.
const codeContextLength = protocol.CodeContextLengthExceeded

// genParams are a request's generation settings, resolved.
type genParams struct {
	n           int
	maxTokens   int
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
}

// params resolves the generation settings of req, whose prompt has
// promptLen tokens.
func (s *server) params(req *protocol.CompletionRequest, promptLen int) (genParams, *protocol.Error) {
	p := genParams{n: req.NOr(), stop: req.Stop, temperature: 1, topP: 1, seed: req.Seed}
	var perr *protocol.Error
	if p.maxTokens, perr = s.maxTokens(req, promptLen); perr != nil {
		return p, perr
	}
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
	if len(req.LogitBias) > 0 {
		p.logitBias = map[int]float32{}
	}
	for k, v := range req.LogitBias {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= s.e.model.Config().Vocab {
			return p, protocol.InvalidRequest("logit_bias", "logit_bias key %q is not a token id of this model", k)
		}
		p.logitBias[id] = float32(v)
	}
	return p, nil
}

// maxTokens returns how many tokens req may generate after a prompt of
// promptLen tokens: its max_tokens, or defaultMaxTokens bounded by what
// the context (max_total_seq_length) leaves. A max_tokens that the context
// cannot hold is a 400, as OpenAI and MLC answer it, rather than a
// generation silently cut short. Every call that carries a request checks
// it (prep_recv too), so a disaggregated request fails before anything is
// reserved.
func (s *server) maxTokens(req *protocol.CompletionRequest, promptLen int) (int, *protocol.Error) {
	limit := s.e.opts.Overrides.MaxTotalSeqLength
	if req.MaxTokens == nil {
		return min(defaultMaxTokens, limit-promptLen), nil
	}
	if m := *req.MaxTokens; m > limit-promptLen { // not promptLen+m: it may overflow
		return 0, protocol.MaxTokensTooLong(promptLen, m, limit)
	}
	return *req.MaxTokens, nil
}
