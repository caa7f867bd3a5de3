package router

import (
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// messagesAPI is Anthropic's Messages API (POST /v1/messages): the
// conversation becomes the chat request of the same turns (see
// protocol.MessagesRequest.Chat), served as chat is, answered and refused
// in Anthropic's shape.
var messagesAPI = api{idPrefix: "msg_", endpoint: "messages", prepare: (*decoder).prepareMessages, sink: messagesSink,
	writeError: func(w http.ResponseWriter, e *protocol.Error) { e.WriteAnthropic(w) }}

// prepareMessages decodes a Messages request and returns the completion
// that answers it, as prepareChat does for the chat request it becomes;
// the model is checked first.
func (d *decoder) prepareMessages(hreq *http.Request) (*protocol.CompletionRequest, []int, *protocol.Error) {
	var mreq protocol.MessagesRequest
	release, e := d.decodeRequest(hreq, &mreq, func() string { return mreq.Model })
	if e != nil {
		return nil, nil, e
	}
	defer release()
	mreq.Grammar = d.grammar()
	creq, e := mreq.Chat()
	if e != nil {
		return nil, nil, e
	}
	return d.chatCompletion(creq)
}

// serveCountTokens answers POST /v1/messages/count_tokens as Anthropic
// does: the input_tokens of a Messages request (its system prompt, tools
// and turns, rendered as the request would be), without generating;
// max_tokens may be absent.
func (d *decoder) serveCountTokens(w http.ResponseWriter, hreq *http.Request) {
	lift := d.readDeadline(w)
	prompt, e := d.countTokens(hreq)
	if e == nil || e.Status != http.StatusRequestTimeout {
		lift()
	}
	if e != nil {
		if e.Status == http.StatusRequestTimeout {
			w.Header().Set("Connection", "close") // the body is still coming
		}
		e.WriteAnthropic(w)
		return
	}
	protocol.WriteJSON(w, http.StatusOK, struct {
		InputTokens int `json:"input_tokens"`
	}{prompt})
}

// countTokens is the prompt's token count of the Messages request of
// hreq.
func (d *decoder) countTokens(hreq *http.Request) (int, *protocol.Error) {
	var mreq protocol.MessagesRequest
	release, e := d.decodeRequest(hreq, &mreq, func() string { return mreq.Model })
	if e != nil {
		return 0, e
	}
	defer release()
	if mreq.MaxTokens == nil {
		mreq.MaxTokens = new(1)
	}
	mreq.Grammar = d.grammar()
	creq, e := mreq.Chat()
	if e != nil {
		return 0, e
	}
	_, prompt, e := d.chatCompletion(creq)
	return len(prompt), e
}
