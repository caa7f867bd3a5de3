package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// tinyTemplate is the template of the built-in tiny model.
type tinyTemplate struct{}

// Tiny returns the template of the built-in tiny model, whose vocabulary
// is word-level English: each turn is its role as a plain word, a colon,
// a space, the text and a newline, and the generation prompt is
// "assistant:". For example
//
//	system: be brief.
//	user: hello there.
//	assistant:
//
// Tools render Hermes-style, so that a Hermes parser reads the calls in
// an answer: the prompt starts with a system turn holding the
// conversation's first system message, if any, then the tools, one JSON
// object per line between <tools> and </tools>, and a line of
// instructions ([TinyToolsInstruction]). An assistant turn's tool_calls
// follow its text, each as <tool_call>{"name": "f", "arguments": {...}}
// </tool_call> (the arguments string decoded and encoded compactly), and
// a tool turn's text is wrapped in <tool_response> and </tool_response>.
// For example
//
//	system: be brief.
//	<tools>
//	{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}
//	</tools>
//	To call a function, answer <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>
//	user: weather in Paris?
//	assistant: <tool_call>{"name": "get_weather", "arguments": {"city":"Paris"}}</tool_call>
//	tool: <tool_response>sunny</tool_response>
//	assistant:
//
// Without tools a conversation renders as it always did: tool_calls are
// left out and a tool turn is plain. Template variables, non-text content
// parts and tool calls or tools that are not JSON function objects are
// errors wrapping ErrUnsupported. Its stop string is "\nuser:", so that
// the model stops where it would start the user's next turn.
func Tiny() Template { return tinyTemplate{} }

// TinyToolsInstruction is the line that tells the tiny model, after its
// tools, how to call one.
const TinyToolsInstruction = `To call a function, answer <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>`

// StopStrings returns "\nuser:".
func (tinyTemplate) StopStrings() []string { return []string{"\nuser:"} }

// Render renders msgs in the tiny format.
func (tinyTemplate) Render(msgs []Message, opts Options) (string, error) {
	if len(opts.Vars) > 0 {
		return "", fmt.Errorf("chat: template variable %q with the tiny template: %w", firstKey(opts.Vars), ErrUnsupported)
	}
	tools := len(opts.Tools) > 0
	var b strings.Builder
	first := 0 // the first message rendered as a turn of its own
	if tools {
		block, err := tinyTools(opts.Tools)
		if err != nil {
			return "", err
		}
		b.WriteString("system: ")
		if len(msgs) > 0 && strings.ToLower(msgs[0].Role) == "system" {
			text, err := msgs[0].Content.plainText()
			if err != nil {
				return "", fmt.Errorf("chat: messages[0]: %w", err)
			}
			b.WriteString(text)
			b.WriteString("\n")
			first = 1
		}
		b.WriteString(block)
	}
	for i := first; i < len(msgs); i++ {
		m := msgs[i]
		text, err := m.Content.plainText()
		if err != nil {
			return "", fmt.Errorf("chat: messages[%d]: %w", i, err)
		}
		role := strings.ToLower(m.Role)
		if role == "" {
			return "", fmt.Errorf("chat: messages[%d] has no role: %w", i, ErrUnsupported)
		}
		b.WriteString(role)
		b.WriteString(": ")
		switch {
		case tools && role == "tool":
			b.WriteString("<tool_response>")
			b.WriteString(text)
			b.WriteString("</tool_response>")
		case tools:
			b.WriteString(text)
			for j, raw := range m.ToolCalls {
				call, err := tinyToolCall(raw)
				if err != nil {
					return "", fmt.Errorf("chat: messages[%d].tool_calls[%d]: %w", i, j, err)
				}
				b.WriteString(call)
			}
		default:
			b.WriteString(text)
		}
		b.WriteString("\n")
	}
	if opts.AddGenerationPrompt {
		b.WriteString("assistant:")
	}
	return b.String(), nil
}

// tinyTools returns the tools block of the tiny template: each tool as
// compact JSON on a line between <tools> and </tools>, then the
// instruction line.
func tinyTools(tools []json.RawMessage) (string, error) {
	var b strings.Builder
	b.WriteString("<tools>\n")
	for i, raw := range tools {
		var tool struct {
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		var line bytes.Buffer
		if err := json.Unmarshal(raw, &tool); err != nil || tool.Function == nil || tool.Function.Name == "" {
			return "", fmt.Errorf("chat: tools[%d]: want {\"type\": \"function\", \"function\": {\"name\": ...}}: %w", i, ErrUnsupported)
		}
		if err := json.Compact(&line, raw); err != nil {
			return "", fmt.Errorf("chat: tools[%d]: %v: %w", i, err, ErrUnsupported)
		}
		b.Write(line.Bytes())
		b.WriteString("\n")
	}
	b.WriteString("</tools>\n")
	b.WriteString(TinyToolsInstruction)
	b.WriteString("\n")
	return b.String(), nil
}

// tinyToolCall renders an OpenAI tool call, whose function.arguments is
// a JSON string (an object is taken as is; an empty string is {}), as
// <tool_call>{"name": "f", "arguments": {...}}</tool_call>.
func tinyToolCall(raw json.RawMessage) (string, error) {
	var call struct {
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &call); err != nil || call.Function == nil || call.Function.Name == "" {
		return "", fmt.Errorf("want {\"function\": {\"name\": ..., \"arguments\": ...}}: %w", ErrUnsupported)
	}
	args := bytes.TrimSpace(call.Function.Arguments)
	if len(args) > 0 && args[0] == '"' {
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return "", fmt.Errorf("arguments: %v: %w", err, ErrUnsupported)
		}
		args = bytes.TrimSpace([]byte(s))
	}
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil || compact.Bytes()[0] != '{' {
		return "", fmt.Errorf("arguments %q: want a JSON object: %w", args, ErrUnsupported)
	}
	name, err := jsonNoEscape(call.Function.Name)
	if err != nil {
		return "", err
	}
	return `<tool_call>{"name": ` + name + `, "arguments": ` + compact.String() + `}</tool_call>`, nil
}

// jsonNoEscape encodes v as JSON without escaping <, > and &.
func jsonNoEscape(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
