package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Message is one chat turn as the OpenAI chat completions API sends it.
type Message struct {
	// Role is "system", "user", "assistant" or "tool" (or any role the
	// template knows).
	Role string `json:"role"`
	// Content is the turn's text: a string, an array of parts, or null.
	Content Content `json:"content"`
	// Name is the optional participant name. Jinja templates see it as
	// message.name; MLC conversation templates ignore it, as MLC does.
	Name string `json:"name,omitempty"`
	// ToolCalls holds an assistant turn's tool calls, passed through to
	// Jinja templates as message.tool_calls. MLC conversation templates
	// reject them, as MLC does.
	ToolCalls []json.RawMessage `json:"tool_calls,omitempty"`
	// ToolCallID ties a "tool" turn to the call it answers; Jinja
	// templates see it as message.tool_call_id.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Content is a message's content, which the OpenAI API sends as a string,
// as an array of typed parts, or as null. The zero Content is the empty
// string.
type Content struct {
	// Text is the content when it was sent as a string.
	Text string
	// Parts is the content when it was sent as an array; it is non-nil
	// exactly when the content is an array (even an empty one).
	Parts []ContentPart
	// Null reports that the content was JSON null, as for an assistant
	// turn that only makes tool calls. It is ignored when Parts is
	// non-nil. Absent content decodes as the empty string.
	Null bool
}

// ContentPart is one element of an array content. Only "text" parts can
// be rendered; others (such as "image_url") make Render fail with
// ErrUnsupported.
type ContentPart struct {
	// Type is the part type, such as "text" or "image_url".
	Type string `json:"type"`
	// Text is the text of a "text" part.
	Text string `json:"text,omitempty"`
	// ImageURL is the image_url object of an "image_url" part, kept so
	// that the message round-trips.
	ImageURL json.RawMessage `json:"image_url,omitempty"`
}

// MarshalJSON encodes the part, always with a "text" member for a
// "text" part, even an empty one.
func (p ContentPart) MarshalJSON() ([]byte, error) {
	type plain ContentPart // without the method
	if p.Type != "text" {
		return json.Marshal(plain(p))
	}
	return json.Marshal(struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		ImageURL json.RawMessage `json:"image_url,omitempty"`
	}{p.Type, p.Text, p.ImageURL})
}

// PartsContent returns array content made of parts.
func PartsContent(parts ...ContentPart) Content {
	if parts == nil {
		parts = []ContentPart{}
	}
	return Content{Parts: parts}
}

// IsParts reports whether the content is an array of parts.
func (c Content) IsParts() bool { return c.Parts != nil }

// IsNull reports whether the content is null.
func (c Content) IsNull() bool { return c.Parts == nil && c.Null }

// String returns the content as text: the string itself, or the text of
// every "text" part concatenated without a separator (non-text parts are
// skipped). Null content is the empty string.
func (c Content) String() string {
	if c.Parts == nil {
		return c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// plainText is String, except that a non-text part is an ErrUnsupported
// error, since the templates here render text only.
//
// Parts are concatenated without a separator because that is what MLC's
// Conversation.as_prompt does with a list of text parts when the role
// template is the bare placeholder, so both template kinds agree.
func (c Content) plainText() (string, error) {
	for _, p := range c.Parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q: %w", p.Type, ErrUnsupported)
		}
	}
	return c.String(), nil
}

// MarshalJSON encodes the content as a string, an array or null.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	case c.Null:
		return []byte("null"), nil
	default:
		return json.Marshal(c.Text)
	}
}

// UnmarshalJSON decodes a string, an array of parts or null.
func (c *Content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	*c = Content{}
	switch {
	case bytes.Equal(data, []byte("null")):
		c.Null = true
		return nil
	case len(data) > 0 && data[0] == '"':
		if err := json.Unmarshal(data, &c.Text); err != nil {
			return fmt.Errorf("chat: content: %w", err)
		}
		return nil
	case len(data) > 0 && data[0] == '[':
		var parts []ContentPart
		if err := json.Unmarshal(data, &parts); err != nil {
			return fmt.Errorf("chat: content parts: %w", err)
		}
		*c = PartsContent(parts...)
		return nil
	default:
		return fmt.Errorf("chat: content must be a string, an array of parts or null, got %.20s", data)
	}
}
