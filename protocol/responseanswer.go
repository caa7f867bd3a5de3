package protocol

import (
	"encoding/json"
	"strings"
)

// The answers of OpenAI's Responses API: the response object (whole,
// stored, and in the events of its stream), its items, and the events.

// RoleDeveloper is the Responses API's name for system instructions in
// the input.
const RoleDeveloper = "developer"

// Types of a message's content parts.
const (
	ContentInputText  = "input_text"
	ContentOutputText = "output_text"
)

// Statuses of a response and of its items.
const (
	ResponseInProgress = "in_progress"
	ResponseCompleted  = "completed"
	ResponseIncomplete = "incomplete"
	ResponseFailed     = "failed"
)

// ObjectResponse is the object of a response.
const ObjectResponse = "response"

// Response is a response of the Responses API: the answer of POST
// /v1/responses and of GET /v1/responses/{id}, and the response in the
// events of its stream.
type Response struct {
	ID                 string                     `json:"id"`
	Object             string                     `json:"object"`
	CreatedAt          int64                      `json:"created_at"`
	Status             string                     `json:"status"`
	Error              *ResponseError             `json:"error"`
	IncompleteDetails  *ResponseIncompleteDetails `json:"incomplete_details"`
	Instructions       *string                    `json:"instructions"`
	MaxOutputTokens    *int                       `json:"max_output_tokens"`
	Model              string                     `json:"model"`
	Output             []ResponseMessage          `json:"output"`
	ParallelToolCalls  bool                       `json:"parallel_tool_calls"`
	PreviousResponseID *string                    `json:"previous_response_id"`
	Reasoning          ResponseReasoning          `json:"reasoning"`
	Store              bool                       `json:"store"`
	Temperature        *float64                   `json:"temperature"`
	Text               ResponseText               `json:"text"`
	ToolChoice         json.RawMessage            `json:"tool_choice"`
	Tools              []json.RawMessage          `json:"tools"`
	TopP               *float64                   `json:"top_p"`
	Truncation         string                     `json:"truncation"`
	Usage              *ResponseUsage             `json:"usage"`
	User               *string                    `json:"user"`
	Metadata           map[string]string          `json:"metadata"`
}

// ResponseError is why a response failed.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ResponseIncompleteDetails says why a response is incomplete.
type ResponseIncompleteDetails struct {
	Reason string `json:"reason"` // max_output_tokens
}

// ResponseReasoning is a response's reasoning configuration: none here.
type ResponseReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// ResponseText is the text configuration: its format.
type ResponseText struct {
	Format TextFormat `json:"format"`
}

// ResponseUsage counts a response's tokens.
type ResponseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// NewResponseUsage is the usage of a completion's.
func NewResponseUsage(u Usage) *ResponseUsage {
	r := &ResponseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	r.InputTokensDetails.CachedTokens = u.Cached()
	return r
}

// ResponseMessage is an item of a response's output or input: a message
// (the assistant's, or of the input), a function_call (the model's call
// of a function tool), a function_call_output (the client's answer to
// one, in an input), or an MCP item (responsesmcp.go).
type ResponseMessage struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"` // message, function_call or function_call_output
	Role    string            `json:"role,omitempty"`
	Status  string            `json:"status,omitempty"`
	Content []ResponseContent `json:"content,omitempty"`
	// Of a function_call (CallID, Name, Arguments: a JSON object's text)
	// or a function_call_output (CallID, Output).
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Output    string `json:"output,omitempty"`
	// Of the MCP items: the server's label, an mcp_list_tools' Tools, an
	// mcp_call's Error (or a list's), the approval request an mcp_call
	// ran after or an mcp_approval_response answers, and its answer.
	ServerLabel       string          `json:"server_label,omitempty"`
	Tools             []MCPToolInfo   `json:"tools,omitempty"`
	Error             json.RawMessage `json:"error,omitempty"`
	ApprovalRequestID string          `json:"approval_request_id,omitempty"`
	Approve           bool            `json:"approve,omitempty"`
	Reason            string          `json:"reason,omitempty"`
}

// Types of response items.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
)

// MarshalJSON writes the item with the members of its type.
func (m ResponseMessage) MarshalJSON() ([]byte, error) {
	switch m.Type {
	case ItemFunctionCall:
		return json.Marshal(struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Status    string `json:"status"`
		}{m.Type, m.ID, m.CallID, m.Name, m.Arguments, m.Status})
	case ItemFunctionCallOutput:
		return json.Marshal(struct {
			Type   string `json:"type"`
			ID     string `json:"id"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
			Status string `json:"status"`
		}{m.Type, m.ID, m.CallID, m.Output, m.Status})
	case ItemMCPListTools, ItemMCPCall, ItemMCPApprovalRequest, ItemMCPApprovalResponse:
		return m.marshalMCP()
	}
	content := m.Content
	if content == nil {
		content = []ResponseContent{}
	}
	return json.Marshal(struct {
		ID      string            `json:"id"`
		Type    string            `json:"type"`
		Role    string            `json:"role"`
		Status  string            `json:"status"`
		Content []ResponseContent `json:"content"`
	}{m.ID, m.Type, m.Role, m.Status, content})
}

// NewFunctionCall is an output item calling function name with
// arguments (a JSON object's text).
func NewFunctionCall(id, callID, name, arguments, status string) ResponseMessage {
	return ResponseMessage{ID: id, Type: ItemFunctionCall, CallID: callID, Name: name, Arguments: arguments, Status: status}
}

// Text is the message's text: its parts joined without a separator.
func (m ResponseMessage) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// NewOutputMessage is the assistant's message of text, with its status.
func NewOutputMessage(id, status, text string) ResponseMessage {
	return ResponseMessage{ID: id, Type: "message", Role: RoleAssistant, Status: status, Content: []ResponseContent{{Type: ContentOutputText, Text: text}}}
}

// ResponseContent is a text part of a message: input_text, or
// output_text, which carries (empty) annotations.
type ResponseContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MarshalJSON writes the part, an output_text with its annotations.
func (c ResponseContent) MarshalJSON() ([]byte, error) {
	if c.Type != ContentOutputText {
		type plain ResponseContent
		return json.Marshal(plain(c))
	}
	return json.Marshal(struct {
		Type        string     `json:"type"`
		Text        string     `json:"text"`
		Annotations []struct{} `json:"annotations"`
	}{c.Type, c.Text, []struct{}{}})
}

// Event types of a streamed response, in the order they come.
const (
	EventResponseCreated    = "response.created"
	EventResponseInProgress = "response.in_progress"
	EventOutputItemAdded    = "response.output_item.added"
	EventContentPartAdded   = "response.content_part.added"
	EventOutputTextDelta    = "response.output_text.delta"
	EventOutputTextDone     = "response.output_text.done"
	EventContentPartDone    = "response.content_part.done"
	EventOutputItemDone     = "response.output_item.done"
	EventArgumentsDelta     = "response.function_call_arguments.delta"
	EventArgumentsDone      = "response.function_call_arguments.done"
	EventResponseCompleted  = "response.completed"
	EventResponseIncomplete = "response.incomplete"
	EventResponseFailed     = "response.failed"
)

// The events of a streamed response; each is sent as "event: <type>"
// with its JSON, and numbered by sequence_number from 0.
type (
	// ResponseStateEvent carries the response: created, in_progress,
	// and the last, completed, incomplete or failed.
	ResponseStateEvent struct {
		Type           string   `json:"type"`
		SequenceNumber int      `json:"sequence_number"`
		Response       Response `json:"response"`
	}
	// ResponseItemEvent is an output item added or done.
	ResponseItemEvent struct {
		Type           string          `json:"type"`
		SequenceNumber int             `json:"sequence_number"`
		OutputIndex    int             `json:"output_index"`
		Item           ResponseMessage `json:"item"`
	}
	// ResponsePartEvent is a content part added or done.
	ResponsePartEvent struct {
		Type           string          `json:"type"`
		SequenceNumber int             `json:"sequence_number"`
		ItemID         string          `json:"item_id"`
		OutputIndex    int             `json:"output_index"`
		ContentIndex   int             `json:"content_index"`
		Part           ResponseContent `json:"part"`
	}
	// ResponseTextEvent is a piece of text (delta) or the whole text
	// (done).
	ResponseTextEvent struct {
		Type           string     `json:"type"`
		SequenceNumber int        `json:"sequence_number"`
		ItemID         string     `json:"item_id"`
		OutputIndex    int        `json:"output_index"`
		ContentIndex   int        `json:"content_index"`
		Delta          *string    `json:"delta,omitempty"`
		Text           *string    `json:"text,omitempty"`
		Logprobs       []struct{} `json:"logprobs"`
	}
)

// ResponseArgumentsEvent is a piece of a function_call's arguments
// (delta) or all of them (done).
type ResponseArgumentsEvent struct {
	Type           string  `json:"type"`
	SequenceNumber int     `json:"sequence_number"`
	ItemID         string  `json:"item_id"`
	OutputIndex    int     `json:"output_index"`
	Delta          *string `json:"delta,omitempty"`
	Arguments      *string `json:"arguments,omitempty"`
}

// ResponseItemList is a page of items (GET /v1/responses/{id}/input_items).
type ResponseItemList struct {
	Object  string            `json:"object"` // list
	Data    []ResponseMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// ResponseDeleted answers DELETE /v1/responses/{id}.
type ResponseDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // response
	Deleted bool   `json:"deleted"`
}
