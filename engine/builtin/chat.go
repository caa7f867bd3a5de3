package builtin

import (
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// chatCompletions answers POST /v1/chat/completions as mlc_llm serve does:
// the conversation rendered with the model's chat template and generated
// as a completion with the template's stop strings, answered in the chat
// shape. The conversion is chat.Completion, the router's too, so that the
// engine's chat answer is the text of the completion the router would
// send for it.
func (s *server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	creq, req, perr := s.chatRequest(r)
	if perr != nil {
		perr.Write(w)
		return
	}
	dc := req.DebugConfig
	if dc != nil && dc.SpecialRequest != nil && *dc.SpecialRequest == protocol.SpecialQueryEngineMetrics {
		s.chatMetrics(w, creq.Model)
		return
	}
	s.generate(w, r, req, "", 0, s.chatAnswerOf(creq.Model))
}

// chatRequest reads, checks and renders a chat request, returning it and
// the completion request that answers it.
func (s *server) chatRequest(r *http.Request) (*protocol.ChatCompletionRequest, *protocol.CompletionRequest, *protocol.Error) {
	b, perr := protocol.ReadBody(r.Body, 0)
	if perr != nil {
		return nil, nil, perr
	}
	var creq protocol.ChatCompletionRequest
	if perr := protocol.DecodeJSON(b, &creq); perr != nil {
		return nil, nil, perr
	}
	if perr := creq.Validate(); perr != nil {
		return nil, nil, perr
	}
	if s.e.chat == nil {
		return nil, nil, protocol.InvalidRequest("messages", "model %s has no chat template (%v); use %s", s.e.opts.Model, s.e.chatErr, protocol.PathCompletions)
	}
	req, perr := chat.Completion(s.e.chat, s.e.tok, &creq)
	if perr != nil {
		return nil, nil, perr
	}
	if perr := s.e.checkPromptLength(len(req.Prompt.IDs), "messages"); perr != nil {
		return nil, nil, perr
	}
	if s.e.opts.EnableDebug {
		req.DebugConfig = creq.DebugConfig
	}
	if dc := req.DebugConfig; dc != nil && dc.DisaggConfig != nil && dc.DisaggConfig.Kind != "" {
		return nil, nil, protocol.InvalidRequest("debug_config.disagg_config", "disaggregation runs on completions (the microserving calls); a chat has none")
	}
	return &creq, req, nil
}

// chatMetrics answers a chat's query_engine_metrics special request as
// MLC does: a stream whose one chunk carries the metrics in usage.extra.
func (s *server) chatMetrics(w http.ResponseWriter, model string) {
	usage, perr := s.metricsUsage()
	if perr != nil {
		perr.Write(w)
		return
	}
	a := chatAnswer{s: s, model: s.modelName(model), cr: &request{id: protocol.NewID("")}}
	sse := protocol.NewSSEWriter(w)
	_ = sse.WriteJSON(a.usageChunk(usage))
	_ = sse.WriteDone()
}
