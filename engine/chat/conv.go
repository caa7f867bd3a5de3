package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// Placeholders of MLC's MessagePlaceholders enum. as_prompt looks the
// placeholder up by the upper-cased role name, so these five roles are
// the only ones a role template can hold content for.
const (
	placeholderSystem   = "{system_message}"
	placeholderFunction = "{function_string}"
)

var rolePlaceholders = map[string]string{
	"system":    placeholderSystem,
	"user":      "{user_message}",
	"assistant": "{assistant_message}",
	"tool":      "{tool_message}",
	"function":  placeholderFunction,
}

// Conversation is an MLC conversation template, the conv_template object
// of mlc-chat-config.json (MLC's Conversation class in
// python/mlc_llm/protocol/conversation_protocol.py). Its Render reproduces
// Conversation.as_prompt for text content, after applying the request's
// messages the way mlc_llm serve does. FromConvTemplate makes one and
// returns it as a Template; a caller that needs the token ids asserts
// TokenIDTemplate (or *Conversation).
type Conversation struct {
	name                      string
	systemTemplate            string
	systemMessage             string
	systemPrefixTokenIDs      []int
	addRoleAfterSystemMessage bool
	roles                     map[string]string
	roleTemplates             map[string]string
	messages                  []convMessage
	seps                      [2]string
	roleContentSep            string
	roleEmptySep              string
	stopStr                   []string
	stopTokenIDs              []int
	functionString            string
}

// convMessage is one (role, content) pair of Conversation.messages;
// content is nil for a null content, as Python's None.
type convMessage struct {
	role    string
	content *Content
}

// convJSON is the JSON form of MLC's Conversation, with pointers where
// the Python class has a default that differs from Go's zero value.
type convJSON struct {
	Name                      string            `json:"name"`
	SystemTemplate            *string           `json:"system_template"`
	SystemMessage             string            `json:"system_message"`
	SystemPrefixTokenIDs      []int             `json:"system_prefix_token_ids"`
	AddRoleAfterSystemMessage *bool             `json:"add_role_after_system_message"`
	Roles                     map[string]string `json:"roles"`
	RoleTemplates             map[string]string `json:"role_templates"`
	Messages                  []json.RawMessage `json:"messages"`
	Seps                      []string          `json:"seps"`
	RoleContentSep            string            `json:"role_content_sep"`
	RoleEmptySep              string            `json:"role_empty_sep"`
	StopStr                   []string          `json:"stop_str"`
	StopTokenIDs              []int             `json:"stop_token_ids"`
	FunctionString            string            `json:"function_string"`
	UseFunctionCalling        bool              `json:"use_function_calling"`
}

// FromConvTemplate parses an MLC conversation template, the value of
// mlc-chat-config.json's "conv_template", applying the defaults of MLC's
// Conversation class. It fails, as MLC's validation does, when roles is
// missing or seps does not have one or two entries.
func FromConvTemplate(raw json.RawMessage) (Template, error) {
	var j convJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("chat: conv_template: %w", err)
	}
	if j.Roles == nil {
		return nil, errors.New("chat: conv_template: roles is required")
	}
	if len(j.Seps) == 0 || len(j.Seps) > 2 {
		return nil, fmt.Errorf("chat: conv_template: seps should have size 1 or 2, has %d", len(j.Seps))
	}
	c := &Conversation{
		name:                      j.Name,
		systemTemplate:            placeholderSystem,
		systemMessage:             j.SystemMessage,
		systemPrefixTokenIDs:      j.SystemPrefixTokenIDs,
		addRoleAfterSystemMessage: true,
		roles:                     j.Roles,
		// Defaults that the template's own role_templates override, as
		// in Conversation.__init__.
		roleTemplates: map[string]string{
			"user":      "{user_message}",
			"assistant": "{assistant_message}",
			"tool":      "{tool_message}",
		},
		roleContentSep: j.RoleContentSep,
		roleEmptySep:   j.RoleEmptySep,
		stopStr:        j.StopStr,
		stopTokenIDs:   j.StopTokenIDs,
		functionString: j.FunctionString,
	}
	if j.SystemTemplate != nil {
		c.systemTemplate = *j.SystemTemplate
	}
	if j.AddRoleAfterSystemMessage != nil {
		c.addRoleAfterSystemMessage = *j.AddRoleAfterSystemMessage
	}
	maps.Copy(c.roleTemplates, j.RoleTemplates)
	c.seps = [2]string{j.Seps[0], j.Seps[len(j.Seps)-1]}
	for i, m := range j.Messages {
		cm, err := parseConvMessage(m)
		if err != nil {
			return nil, fmt.Errorf("chat: conv_template: messages[%d]: %w", i, err)
		}
		c.messages = append(c.messages, cm)
	}
	return c, nil
}

// parseConvMessage decodes a [role, content] pair.
func parseConvMessage(raw json.RawMessage) (convMessage, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil {
		return convMessage{}, err
	}
	if len(pair) != 2 {
		return convMessage{}, fmt.Errorf("want a [role, content] pair, have %d elements", len(pair))
	}
	var m convMessage
	if err := json.Unmarshal(pair[0], &m.role); err != nil {
		return convMessage{}, fmt.Errorf("role: %w", err)
	}
	if !bytes.Equal(bytes.TrimSpace(pair[1]), []byte("null")) {
		m.content = new(Content)
		if err := json.Unmarshal(pair[1], m.content); err != nil {
			return convMessage{}, err
		}
	}
	return m, nil
}

// Name returns the template's name, such as "llama-3".
func (c *Conversation) Name() string { return c.name }

// StopStrings returns the template's stop_str.
func (c *Conversation) StopStrings() []string { return c.stopStr }

// StopTokenIDs returns the template's stop_token_ids.
func (c *Conversation) StopTokenIDs() []int { return c.stopTokenIDs }

// PrefixTokenIDs returns the template's system_prefix_token_ids, which
// mlc_llm serve puts before the tokenized prompt.
func (c *Conversation) PrefixTokenIDs() []int { return c.systemPrefixTokenIDs }

// Render returns the prompt for msgs the way mlc_llm serve builds it
// (process_chat_completion_request followed by Conversation.as_prompt):
//
//   - a "system" message, allowed only first, replaces the template's
//     system_message;
//   - the other messages follow the template's own preset messages;
//   - with opts.AddGenerationPrompt, an ("assistant", None) turn ends the
//     list, rendering as the assistant role marker and role_empty_sep;
//   - with opts.Tools, the functions' JSON replaces the last
//     "{function_string}" placeholder (MLC's function calling): the
//     list of every function, or, when opts.ToolChoice names one, that
//     function alone, as check_function_call_usage writes them.
//
// Like MLC it rejects array content on a non-user message, tool_calls,
// and roles the template does not list; those errors, non-text parts,
// tools on a template without a function_string placeholder, and any
// opts.Vars (a conversation template has no variables) wrap
// ErrUnsupported.
func (c *Conversation) Render(msgs []Message, opts Options) (string, error) {
	if len(opts.Vars) > 0 {
		return "", fmt.Errorf("chat: template variable %q on an MLC conversation template: %w", firstKey(opts.Vars), ErrUnsupported)
	}
	systemMessage := c.systemMessage
	turns := append([]convMessage(nil), c.messages...)
	for i, m := range msgs {
		if err := checkConvMessage(i, m); err != nil {
			return "", err
		}
		content := m.Content
		if m.Role == "system" {
			systemMessage = content.String()
			continue
		}
		turns = append(turns, convMessage{role: m.Role, content: &content})
	}
	if opts.AddGenerationPrompt {
		turns = append(turns, convMessage{role: "assistant"})
	}
	functionString := c.functionString
	if len(opts.Tools) > 0 {
		if !c.ReadsFunctionString() {
			return "", fmt.Errorf("chat: tools on conversation template %q, which has no %s placeholder: %w", c.name, placeholderFunction, ErrUnsupported)
		}
		s, err := mlcFunctionString(opts.Tools)
		if opts.ToolChoice != "" {
			s, err = mlcNamedFunctionString(opts.Tools, opts.ToolChoice)
		}
		if err != nil {
			return "", err
		}
		functionString = s
	}
	return c.asPrompt(systemMessage, turns, functionString)
}

// checkConvMessage applies MLC's ChatCompletionRequest.check_message_validity.
func checkConvMessage(i int, m Message) error {
	switch {
	case m.Role == "system" && i != 0:
		return fmt.Errorf("chat: system message at position %d (only the first message may be a system message): %w", i, ErrUnsupported)
	case m.ToolCallID != "" && m.Role != "tool":
		return fmt.Errorf("chat: %s message with tool_call_id: %w", m.Role, ErrUnsupported)
	case m.Content.IsParts() && m.Role != "user":
		return fmt.Errorf("chat: %s message with a list of content parts: %w", m.Role, ErrUnsupported)
	case len(m.ToolCalls) > 0:
		return fmt.Errorf("chat: assistant tool_calls in an MLC conversation template: %w", ErrUnsupported)
	}
	return nil
}

// ReadsFunctionString reports whether a function_string placeholder can
// reach the prompt.
func (c *Conversation) ReadsFunctionString() bool {
	if strings.Contains(c.systemTemplate, placeholderFunction) || strings.Contains(c.systemMessage, placeholderFunction) {
		return true
	}
	for _, t := range c.roleTemplates {
		if strings.Contains(t, placeholderFunction) {
			return true
		}
	}
	return false
}

// asPrompt is Conversation.as_prompt for text content.
func (c *Conversation) asPrompt(systemMessage string, turns []convMessage, functionString string) (string, error) {
	var b strings.Builder
	systemMsg := strings.ReplaceAll(c.systemTemplate, placeholderSystem, systemMessage)
	b.WriteString(systemMsg)
	for i, t := range turns {
		marker, ok := c.roles[t.role]
		if !ok {
			return "", fmt.Errorf("chat: role %q is not a role of conversation template %q: %w", t.role, c.name, ErrUnsupported)
		}
		sep := c.seps[0]
		if t.role == "assistant" {
			sep = c.seps[1]
		}
		if t.content == nil || t.content.IsNull() {
			b.WriteString(marker + c.roleEmptySep)
			continue
		}
		if c.addRoleAfterSystemMessage || systemMsg == "" || i != 0 {
			b.WriteString(marker + c.roleContentSep)
		}
		tmpl, ok := c.roleTemplates[t.role]
		placeholder, known := rolePlaceholders[t.role]
		if !ok || !known {
			return "", fmt.Errorf("chat: role %q has no role template in conversation template %q: %w", t.role, c.name, ErrUnsupported)
		}
		if !t.content.IsParts() {
			b.WriteString(strings.ReplaceAll(tmpl, placeholder, t.content.Text))
			b.WriteString(sep)
			continue
		}
		for _, p := range t.content.Parts {
			if p.Type != "text" {
				return "", fmt.Errorf("chat: content part of type %q: %w", p.Type, ErrUnsupported)
			}
			b.WriteString(strings.ReplaceAll(tmpl, placeholder, p.Text))
		}
		b.WriteString(sep)
	}
	prompt := b.String()
	// function_string.join(prompt.rsplit("{function_string}", 1)), then
	// drop the remaining placeholders.
	if i := strings.LastIndex(prompt, placeholderFunction); i >= 0 {
		prompt = prompt[:i] + functionString + prompt[i+len(placeholderFunction):]
	}
	return strings.ReplaceAll(prompt, placeholderFunction, ""), nil
}
