package router

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/mcpclient"
	"github.com/caddy-mlc/caddy-mlc/router/responsestore"
)

// responsesAPI is OpenAI's Responses API (POST /v1/responses) for one
// request: the conversation (a stored response's, with
// previous_response_id, then the input) becomes the chat request of the
// same turns (see protocol.ResponsesRequest.Chat), served as chat is.
// Its api is made per request: the sink's response echoes what prepare
// read, and stores it.
func (m *Models) responsesAPI() api {
	c := &responseCall{store: m.responses, maxBytes: m.responsesMax, mcp: m.mcp, mcpRounds: m.mcpRounds, log: m.def.logger}
	return api{idPrefix: "resp_", endpoint: "responses", prepare: c.prepare, sink: c.sink, next: c.next,
		writeError: func(w http.ResponseWriter, e *protocol.Error) { responsesError(e).Write(w) }}
}

// responsesError is e as the Responses API names its parameters: the
// shared path's errors (context_length_exceeded) name the completion's
// max_tokens, which is max_output_tokens here.
func responsesError(e *protocol.Error) *protocol.Error {
	if e.Param == nil || *e.Param != "max_tokens" {
		return e
	}
	out := *e
	out.Param = new("max_output_tokens")
	out.Message = strings.ReplaceAll(e.Message, "max_tokens", "max_output_tokens")
	return &out
}

// responseCall is what a Responses request's prepare read, for its sink.
type responseCall struct {
	store    responsestore.Store // nil: none
	maxBytes int                 // of a stored record
	// mcp are the MCP servers the router may call for the request's
	// hosted tools, each answer at most mcpRounds rounds (mcp.go); nil:
	// mcp tools are left out.
	mcp       *mcpclient.Hosts
	mcpRounds int
	log       *zap.Logger

	ctx     context.Context // the request's
	tenant  string
	req     protocol.ResponsesRequest
	input   []protocol.ResponseMessage // this request's items
	history []protocol.ResponseMessage // the conversation before them
	keep    bool                       // the response is to be stored
	created int64
	// hosted are the request's hosted tools (nil: none); out the
	// answer's sink, made with its first round, which the later rounds
	// write to (mcp.go).
	hosted *hostedTools
	out    mcpSink
}

// prepare decodes a Responses request and returns the completion that
// answers it, as prepareChat does for the chat request it becomes; the
// model is checked first.
func (c *responseCall) prepare(d *decoder, hreq *http.Request) (*protocol.CompletionRequest, []int, *protocol.Error) {
	c.created = time.Now().Unix()
	release, e := d.decodeRequest(hreq, &c.req, func() string { return c.req.Model })
	if e != nil {
		return nil, nil, e
	}
	defer release()
	c.req.Grammar = d.grammar()
	if e := c.req.Validate(); e != nil {
		return nil, nil, e
	}
	if c.input, e = c.req.Items(); e != nil {
		return nil, nil, e
	}
	c.ctx, c.tenant = hreq.Context(), factsOf(hreq.Context()).Tenant
	c.keep = c.store != nil && (c.req.Store == nil || *c.req.Store)
	if id := c.req.PreviousResponseID; id != nil {
		if e := c.continues(*id); e != nil {
			return nil, nil, e
		}
	}
	if n := responsestore.SizeOf(c.history) + responsestore.SizeOf(c.input); c.keep && n > c.maxBytes {
		return nil, nil, responsestore.TooLarge(n, c.maxBytes)
	}
	if e := c.resolveHosted(); e != nil || c.hosted != nil {
		return nil, nil, e // next makes the first round, once the hosted tools are listed
	}
	creq, e := c.req.Chat(c.history, c.input)
	if e != nil {
		return nil, nil, e
	}
	return d.chatCompletion(creq)
}

// continues reads the conversation the request continues: the stored
// response id's, the tenant's own.
func (c *responseCall) continues(id string) *protocol.Error {
	switch {
	case c.store == nil:
		return responsestore.None("previous_response_id")
	case id == "":
		return protocol.InvalidRequest("previous_response_id", "previous_response_id must not be empty").WithCode(protocol.CodeInvalidValue)
	}
	prev, e := responsestore.Load(c.ctx, c.store, c.tenant, id)
	switch {
	case e != nil:
		return e
	case prev == nil:
		return responsestore.NotFound(id, "previous_response_id")
	}
	c.history = prev.Conversation()
	return nil
}

// save stores the response done, when the request asked for it.
func (c *responseCall) save(r protocol.Response) *protocol.Error {
	if !c.keep {
		return nil
	}
	return responsestore.Save(c.ctx, c.store, c.tenant, c.maxBytes, &responsestore.Record{Response: r, Input: c.input, History: c.history})
}

// response is the response object of the request, with its status,
// output and usage.
func (c *responseCall) response(id, model, status string, output []protocol.ResponseMessage, usage *protocol.ResponseUsage) protocol.Response {
	r := protocol.Response{
		ID: id, Object: protocol.ObjectResponse, CreatedAt: c.created, Status: status, Instructions: c.req.Instructions,
		MaxOutputTokens: c.req.MaxOutputTokens, Model: model, Output: output, ParallelToolCalls: true,
		PreviousResponseID: c.req.PreviousResponseID, Temperature: c.req.Temperature, ToolChoice: c.req.ToolChoice, Tools: protocol.RedactedTools(c.req.Tools),
		TopP: c.req.TopP, Truncation: "disabled", Usage: usage, User: c.req.User, Metadata: c.req.Metadata, Store: c.keep,
	}
	if r.ToolChoice == nil {
		r.ToolChoice = json.RawMessage(`"auto"`)
	}
	if r.Tools == nil {
		r.Tools = []json.RawMessage{}
	}
	if c.req.ParallelToolCalls != nil {
		r.ParallelToolCalls = *c.req.ParallelToolCalls
	}
	r.Text.Format.Type = "text"
	if c.req.Text != nil && c.req.Text.Format.Type != "" {
		r.Text.Format = c.req.Text.Format
	}
	if r.Output == nil {
		r.Output = []protocol.ResponseMessage{}
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if status == protocol.ResponseIncomplete {
		r.IncompleteDetails = &protocol.ResponseIncompleteDetails{Reason: "max_output_tokens"}
	}
	return r
}
