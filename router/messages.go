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
	creq, e := mreq.Chat()
	if e != nil {
		return nil, nil, e
	}
	return d.chatCompletion(creq)
}
