package chat

import (
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
// Tools, template variables and non-text content parts are errors
// wrapping ErrUnsupported. Its stop string is "\nuser:", so that the
// model stops where it would start the user's next turn.
func Tiny() Template { return tinyTemplate{} }

// StopStrings returns "\nuser:".
func (tinyTemplate) StopStrings() []string { return []string{"\nuser:"} }

// Render renders msgs in the tiny format.
func (tinyTemplate) Render(msgs []Message, opts Options) (string, error) {
	if len(opts.Tools) > 0 {
		return "", fmt.Errorf("chat: tools with the tiny template: %w", ErrUnsupported)
	}
	if len(opts.Vars) > 0 {
		return "", fmt.Errorf("chat: template variable %q with the tiny template: %w", firstKey(opts.Vars), ErrUnsupported)
	}
	var b strings.Builder
	for i, m := range msgs {
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
		b.WriteString(text)
		b.WriteString("\n")
	}
	if opts.AddGenerationPrompt {
		b.WriteString("assistant:")
	}
	return b.String(), nil
}
