package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/toolcall"
	"go.uber.org/zap"
)

// decoder turns the requests of a model's API into what the router
// serves, before any engine is asked: it reads the body (bounded in size
// and time), decodes and validates it, checks the model it names,
// tokenizes the prompt or renders the chat.
type decoder struct {
	*Config
	tok      Tokenizer // nil when it could not be loaded (see tokErr)
	tokErr   error
	chatTmpl chat.Template
	chatErr  error
	// toolFormat is the parser of the model's tool calls
	// (router/toolcall); "" when the router knows none.
	toolFormat string
	context    int // tokens one sequence may hold; 0: unknown (engine.Driver.ContextWindow)
	// embedBounds is what the router knows of the embedding model.
	embedBounds embeddingBounds
	// largeSlots are the process's slots for large bodies (Live).
	largeSlots chan struct{}
}

// newDecoder loads what decoding cfg's requests needs: the model's
// tokenizer and chat template, its context and the embedding model's
// bounds. The built-in engine cannot run without a tokenizer, so neither
// can the router; other engines may load models the router cannot read
// (an HF:// name, say): the router then serves token-id prompts only, and
// says so.
func newDecoder(cfg *Config, log *zap.Logger, largeSlots chan struct{}) (decoder, error) {
	d := decoder{Config: cfg, largeSlots: largeSlots}
	tok, err := tokenizer.ForModel(cfg.Path)
	switch {
	case err == nil:
		d.tok = tok
	case cfg.EngineKind.Driver().Traits().NeedsTokenizer:
		return d, fmt.Errorf("mlc_router: loading the tokenizer: %w", err)
	default:
		d.tokErr = err
		log.Warn("no tokenizer: only token-id prompts are served; string prompts, chat, echo and resuming a partly sent answer are off",
			zap.String("model", cfg.Path), zap.Error(err))
	}
	// The router refuses what does not fit with OpenAI's
	// context_length_exceeded before any engine is asked: MLC's engines
	// do not refuse a max_tokens beyond their context, they stop
	// generating at its end, and a request must get the same answer
	// whichever engine serves it.
	d.context = cfg.EngineKind.Driver().ContextWindow(cfg.Path, cfg.EngineArgs)
	if d.chatTmpl, err = loadChatTemplate(cfg.Path); err != nil {
		d.chatErr = err
		log.Warn("no chat template: /v1/chat/completions is off", zap.Error(err))
	}
	if d.toolFormat, err = toolFormatOf(cfg, d.chatTmpl); err != nil {
		return d, err
	}
	d.embedBounds = loadEmbeddingBounds(cfg.EngineKind, cfg.EmbeddingModel, cfg.EmbeddingModelLib)
	return d, nil
}

// readDeadline bounds the reading of the request body of w's request by
// the router's body timeout; the returned func lifts the bound once the
// body was read (the connection's read deadline would otherwise cut the
// answer's stream: Go's server reads on to see a client leave). A body
// that timed out keeps its expired deadline: Go's HTTP/1 server reads
// what is left of a small body before it writes the answer, and would
// wait on the client for ever.
func (d *decoder) readDeadline(w http.ResponseWriter) (lift func()) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(time.Duration(d.BodyTimeout))) != nil {
		return func() {} // not supported by this connection: Caddy's read_body still applies
	}
	return func() { _ = rc.SetReadDeadline(time.Time{}) }
}

// readBody reads hreq's body. A large one waits for a large slot
// (bounded by the queue timeout) before it is decoded; release gives
// the slot back once the request is tokenized.
func (d *decoder) readBody(hreq *http.Request) (body []byte, release func(), e *protocol.Error) {
	b, e := protocol.ReadBody(hreq.Body, d.MaxBodySize)
	if e != nil {
		return nil, nil, e
	}
	if len(b) < largeBody {
		return b, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(hreq.Context(), time.Duration(d.QueueTimeout))
	defer cancel()
	select {
	case d.largeSlots <- struct{}{}:
		return b, func() { <-d.largeSlots }, nil
	case <-ctx.Done():
		if hreq.Context().Err() != nil {
			return nil, nil, protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeServer, "request canceled")
		}
		e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
			"too many large requests are being prepared; retry later")
		e.RetryAfter = retryAfter
		return nil, nil, e
	}
}

// decodeRequest reads hreq's body into v and checks the model it names
// (model says which, once v is decoded) before the rest of it: a request
// for another model is judged by nothing of this one. release gives back
// the large slot the request may hold (see readBody).
func (d *decoder) decodeRequest(hreq *http.Request, v any, model func() string) (release func(), _ *protocol.Error) {
	b, release, e := d.readBody(hreq)
	if e != nil {
		return nil, e
	}
	if e = protocol.DecodeJSON(b, v); e == nil {
		e = d.checkModel(model())
	}
	if e != nil {
		release()
		return nil, e
	}
	return release, nil
}

// encode tokenizes a prompt's text. When the context is known and the
// text longer than its probe, the probe is tokenized first: a prompt that
// overflows the context there is refused at once (the cut may split a
// token in two, hence the one token of slack).
func (d *decoder) encode(text string) ([]int, *protocol.Error) {
	if probe := d.context * probeBytesPerToken; d.context > 0 && len(text) > probe {
		for probe > 0 && !utf8.RuneStart(text[probe]) {
			probe--
		}
		if n := len(d.tok.Encode(text[:probe])) - 1; n >= d.context {
			return nil, protocol.PromptTooLongAtLeast(n, d.context)
		}
	}
	return d.tok.Encode(text), nil
}

// prepareCompletion decodes a completion request and returns its prompt
// ids, tokenizing a string prompt. The model is checked before the other
// fields: a request for another model is judged by nothing of this one.
func (d *decoder) prepareCompletion(hreq *http.Request) (*protocol.CompletionRequest, []int, *protocol.Error) {
	var req protocol.CompletionRequest
	release, e := d.decodeRequest(hreq, &req, func() string { return req.Model })
	if e != nil {
		return nil, nil, e
	}
	defer release()
	if e := req.TakeSessionKey(); e != nil {
		return nil, nil, e
	}
	req.Grammar = d.grammar()
	if e := req.Validate(); e != nil {
		return nil, nil, e
	}
	if e := d.needsTokenizer(&req); e != nil {
		return nil, nil, e
	}
	if !req.Prompt.IsText {
		return &req, req.Prompt.IDs, nil
	}
	prompt, apiErr := d.encode(req.Prompt.Text)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if len(prompt) == 0 {
		return nil, nil, protocol.InvalidRequest("prompt", "prompt encodes to no tokens")
	}
	return &req, prompt, nil
}

// needsTokenizer refuses what cannot be served without a tokenizer.
func (d *decoder) needsTokenizer(req *protocol.CompletionRequest) *protocol.Error {
	switch {
	case d.tok != nil:
		return nil
	case req.Prompt.IsText:
		return d.noTokenizer("prompt", "a string prompt")
	case req.Echo:
		return d.noTokenizer("echo", "echo")
	}
	return nil
}

// prepareChat decodes a chat request and returns the completion request
// that answers it (its text is the assistant's answer): the conversation
// rendered with the model's template and tokenized, and the template's
// stop strings.
func (d *decoder) prepareChat(hreq *http.Request) (*protocol.CompletionRequest, []int, *protocol.Error) {
	creq, release, apiErr := d.decodeChat(hreq)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	defer release()
	return d.chatCompletion(creq)
}

// chatCompletion returns the completion request that answers a checked
// chat request, and its prompt ids: the APIs built on chat (Messages,
// Responses) answer through it too, so that their text is chat's.
func (d *decoder) chatCompletion(creq *protocol.ChatCompletionRequest) (*protocol.CompletionRequest, []int, *protocol.Error) {
	tc := creq.ToolCalling(d.toolFormat)
	prompt, stops, apiErr := d.renderChat(creq, tc)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	req := creq.Completion(prompt)
	req.Stop = append(append(protocol.StopList(nil), creq.Stop...), stops...)
	if tc.Forced() {
		// The call is the whole answer, written under its schema; it
		// takes the place of a response format, which constrains text.
		rf, e := creq.ToolCallFormat(toolcall.ArgumentsKey(tc.Format))
		if e != nil {
			return nil, nil, e
		}
		req.ResponseFormat = rf
		tc.Format = toolcall.JSON
	}
	req.ToolCalling = tc
	req.Reasoning = d.reasons(creq)
	return req, prompt, nil
}

// reasons reports whether the answer to creq begins with the model's
// reasoning: its template has a thinking switch, and neither the client
// (thinking disabled) nor its template variables turned it off.
func (d *decoder) reasons(creq *protocol.ChatCompletionRequest) bool {
	t, ok := d.chatTmpl.(chat.Inspectable)
	if !ok || !t.Reads(thinkingSwitch) {
		return false
	}
	if v, set := creq.ChatTemplateKwargs[thinkingSwitch]; set {
		on, _ := v.(bool)
		return on
	}
	return creq.Thinking == nil || *creq.Thinking
}

// decodeChat reads, decodes and validates a chat request; the model is
// checked before the other fields, as prepareCompletion does.
// release gives back the large slot the request may hold (see readBody).
func (d *decoder) decodeChat(hreq *http.Request) (_ *protocol.ChatCompletionRequest, release func(), _ *protocol.Error) {
	var creq protocol.ChatCompletionRequest
	release, e := d.decodeRequest(hreq, &creq, func() string { return creq.Model })
	if e != nil {
		return nil, nil, e
	}
	creq.Grammar = d.grammar()
	e = creq.Validate()
	if e == nil {
		e = d.checkTopLogprobs(creq.TopLogprobs)
	}
	if e != nil {
		release()
		return nil, nil, e
	}
	return &creq, release, nil
}

// grammar is the grammar engine of the engines: the router checks a
// request's response format and required call as it compiles them.
func (d *decoder) grammar() protocol.SchemaGrammar { return d.EngineKind.Driver().Traits().Grammar }

// checkTopLogprobs refuses a top_logprobs that the engines cannot serve.
// The router asks engines for a chat's top_logprobs as the logprobs of a
// completion request. The built-in engine serves them up to the chat
// bound (20); MLC-LLM's engines validate a completion's logprobs against
// its own bound (5; engine.Traits.MaxLogprobs), so with them more is a
// 400 here, naming the chat field, rather than fewer alternatives than
// asked for or an engine's error about a field the client did not send.
func (d *decoder) checkTopLogprobs(k *int) *protocol.Error {
	if k == nil || *k <= protocol.MaxCompletionLogprobs {
		return nil
	}
	bound := d.EngineKind.Driver().Traits().MaxLogprobs
	if bound == 0 || *k <= bound {
		return nil
	}
	return protocol.InvalidRequest("top_logprobs", "top_logprobs must be at most %d with %s engines (they serve a chat's logprobs through completion requests, which they bound at %d), got %d",
		bound, d.EngineKind, bound, *k).WithCode(protocol.CodeIntegerAboveMax)
}

// renderChat returns the prompt ids of the conversation and the stop
// strings its template implies.
func (d *decoder) renderChat(creq *protocol.ChatCompletionRequest, tc *protocol.ToolCalling) ([]int, []string, *protocol.Error) {
	if d.tok == nil {
		return nil, nil, d.noTokenizer("messages", "a chat completion")
	}
	if d.chatTmpl == nil {
		return nil, nil, protocol.InvalidRequest("messages", "model %s has no chat template (%v); use /v1/completions", d.Model, d.chatErr)
	}
	msgs := make([]chat.Message, len(creq.Messages))
	for i, raw := range creq.Messages {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil || msgs[i].Role == "" {
			return nil, nil, protocol.InvalidRequest("messages", "messages[%d]: want an object with a role and a content", i)
		}
	}
	opts, apiErr := d.renderOptions(creq, tc)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	text, err := d.chatTmpl.Render(msgs, opts)
	if errors.Is(err, chat.ErrUnsupported) {
		return nil, nil, protocol.InvalidRequest("messages", "%v", err)
	}
	if err != nil {
		return nil, nil, protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "rendering the chat template: %v", err)
	}
	var prompt []int
	if t, ok := d.chatTmpl.(chat.TokenIDTemplate); ok {
		prompt = append(prompt, t.PrefixTokenIDs()...)
	}
	ids, apiErr := d.encode(text)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	prompt = append(prompt, ids...)
	if len(prompt) == 0 {
		return nil, nil, protocol.InvalidRequest("messages", "the conversation renders to no tokens")
	}
	return prompt, d.chatTmpl.StopStrings(), nil
}

// renderOptions are the template's options for creq (tc: how its answer is
// read for calls, nil when it offers no tools): its variables, the
// thinking switch set from the client's thinking (when the template has
// one), and its tools unless tool_choice is "none" — offered only when
// the router can read the calls back.
func (d *decoder) renderOptions(creq *protocol.ChatCompletionRequest, tc *protocol.ToolCalling) (chat.Options, *protocol.Error) {
	opts := chat.DefaultOptions()
	opts.Vars = creq.ChatTemplateKwargs
	if t, ok := d.chatTmpl.(chat.Inspectable); ok && creq.Thinking != nil && t.Reads(thinkingSwitch) {
		if _, set := opts.Vars[thinkingSwitch]; !set {
			opts.Vars = maps.Clone(opts.Vars)
			if opts.Vars == nil {
				opts.Vars = map[string]any{}
			}
			opts.Vars[thinkingSwitch] = *creq.Thinking
		}
	}
	if tc == nil {
		return opts, nil
	}
	if d.toolFormat == "" {
		return opts, protocol.InvalidRequest("tools", "model %s's chat template writes tool calls in no syntax this router recognises, so calls could not be read back; the operator can name one with tool_parser (%s)",
			d.Model, strings.Join(toolcall.Formats(), ", ")).WithCode(protocol.CodeUnsupportedValue)
	}
	opts.Tools = creq.Tools
	if tc.Choice == protocol.ToolChoiceFunction {
		opts.ToolChoice = tc.Function
	}
	return opts, nil
}

// thinkingSwitch is the template variable that turns a model's thinking
// on or off (Qwen3's, and the templates that copy it).
const thinkingSwitch = "enable_thinking"

// toolFormatOf is the tool-call parser of a model: the one cfg names,
// else the one its template teaches: Hermes-style for tiny (its template
// renders tools so), MLC's own for a conversation template with a
// function_string, the family of a Jinja template's syntax.
func toolFormatOf(cfg *Config, tmpl chat.Template) (string, error) {
	if cfg.ToolParser != "" {
		if _, err := toolcall.New(cfg.ToolParser); err != nil {
			return "", fmt.Errorf("mlc_router: tool_parser: %w", err)
		}
		return cfg.ToolParser, nil
	}
	switch t := tmpl.(type) {
	case nil:
		return "", nil
	case *chat.Conversation:
		if t.ReadsFunctionString() {
			return "mlc", nil
		}
		return "", nil
	case chat.Inspectable:
		return toolcall.Detect(t.Source()), nil
	}
	if cfg.Path == tokenizer.TinyModel {
		return "hermes", nil
	}
	return "", nil
}

// prepareEmbeddings decodes and checks an embeddings request: the model
// (asked: the name the client gave, which its answer carries), the inputs
// (count, and tokens where the router can count them), the dimensions.
func (d *decoder) prepareEmbeddings(b []byte) (*protocol.EmbeddingRequest, string, *protocol.Error) {
	req := new(protocol.EmbeddingRequest)
	if e := protocol.DecodeJSON(b, req); e != nil {
		return nil, "", e
	}
	if e := d.checkEmbeddingModel(req.Model); e != nil {
		return nil, "", e
	}
	if d.EmbeddingModel == "" {
		e := protocol.Errorf(http.StatusNotFound, protocol.ErrTypeInvalidRequest,
			"the model %q serves no embeddings: give it an embedding_model", d.Model).WithCode(protocol.CodeModelNotFound)
		e.Param = new("model")
		return nil, "", e
	}
	if e := req.Validate(); e != nil {
		return nil, "", e
	}
	if d.embedBounds.dim > 0 {
		if e := req.CheckDimensions(d.embedBounds.dim); e != nil {
			return nil, "", e
		}
	}
	if d.embedBounds.maxTokens > 0 && d.tok != nil {
		for i, item := range req.Input.Items {
			n := len(item.IDs)
			if item.IsText {
				n = len(d.tok.Encode(item.Text))
			}
			if e := req.Input.CheckTokens(i, n, d.embedBounds.maxTokens); e != nil {
				return nil, "", e
			}
		}
	}
	asked := req.Model
	req.Model = d.EmbeddingModel
	return req, asked, nil
}

// checkModel checks a completion's model field: absent or empty means
// the served model, as MLC's server (one model) reads it; another model
// is a 404, as OpenAI answers a model it does not have, rather than an
// answer from a model the client did not ask for.
func (d *decoder) checkModel(model string) *protocol.Error {
	if model == "" || model == d.Model {
		return nil
	}
	return modelNotFound(model, []string{d.Model}, d.embeddingNames())
}

// checkEmbeddingModel checks an embeddings request's model field: the
// embedding model's name, or the chat model's (which reaches its
// embedding model too), or none.
func (d *decoder) checkEmbeddingModel(model string) *protocol.Error {
	if model == "" || model == d.Model || model == d.EmbeddingName && model != "" {
		return nil
	}
	return modelNotFound(model, []string{d.Model}, d.embeddingNames())
}

// noTokenizer is the answer to a request that needs the tokenizer the
// router could not load.
func (d *decoder) noTokenizer(param, what string) *protocol.Error {
	return protocol.InvalidRequest(param, "%s needs the model's tokenizer, which this router could not load (%v); send the prompt as token ids", what, d.tokErr)
}

// embeddingNames is the embedding model's name, listed beside the chat
// model's when it differs from it.
func (d *decoder) embeddingNames() []string {
	if d.EmbeddingName == "" || d.EmbeddingName == d.Model {
		return nil
	}
	return []string{d.EmbeddingName}
}

// Admission is what a request costs the router before any engine is
// asked: reading, decoding and tokenizing its body. A few large bodies
// (a 3 MB prompt takes about a second to tokenize) must not starve the
// streams, the health probes and the engines of the CPU, so bodies over
// largeBody are decoded and tokenized a few at a time (largeSlots), and a
// prompt that overflows the context is refused from a prefix of it.

// largeBody is the body size from which a request takes a large slot:
// a body below it decodes and tokenizes in well under a millisecond.
const largeBody = 64 << 10

// newLargeSlots bounds the large requests prepared at once: half the
// CPUs, at least one, so that the rest keep serving.
func newLargeSlots() chan struct{} { return make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)) }

// probeBytesPerToken sizes the prefix of a long prompt that is tokenized
// first: context tokens times this many bytes. Text averages about four
// bytes a token; a prompt whose prefix already holds more tokens than the
// context is refused without tokenizing the rest.
const probeBytesPerToken = 8

// loadChatTemplate returns the model's chat template: the built-in one for
// tiny, else the model directory's (mlc-chat-config.json's conv_template,
// or tokenizer_config.json's Jinja chat_template).
func loadChatTemplate(model string) (chat.Template, error) {
	if model == tokenizer.TinyModel {
		return chat.Tiny(), nil
	}
	return chat.Load(model)
}
