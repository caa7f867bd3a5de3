package chat

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
)

// ErrUnsupported is wrapped by the errors Render returns when a request
// uses a feature the template cannot express: tools on a template that
// never reads them, non-text content parts, a role the template has no
// marker for, template variables it does not read, or a conversation the
// template itself rejects (raise_exception). Callers should test for it
// with errors.Is and answer such requests with a client error.
var ErrUnsupported = errors.New("unsupported by the chat template")

// Template renders a conversation into the prompt string the model was
// trained on. Implementations are safe for concurrent use.
type Template interface {
	// Render returns the prompt for msgs.
	Render(msgs []Message, opts Options) (string, error)
	// StopStrings returns extra stop strings the template implies, such
	// as "<|eot_id|>" or "<|im_end|>", when they are known. It may be nil.
	StopStrings() []string
}

// TokenIDTemplate is implemented by templates that also know token ids,
// as MLC conversation templates do. The result of Render does not include
// the prefix tokens: a caller tokenizes the prompt and prepends
// PrefixTokenIDs, as mlc_llm serve does with system_prefix_token_ids.
type TokenIDTemplate interface {
	Template
	// PrefixTokenIDs returns the token ids to put before the tokenized
	// prompt (for example the id of "<|begin_of_text|>"), or nil.
	PrefixTokenIDs() []int
	// StopTokenIDs returns token ids that end generation, or nil.
	StopTokenIDs() []int
}

// Inspectable is implemented by templates whose text a caller may read
// for their conventions (Jinja's): the variables they read, such as a
// thinking switch, and the syntax of the tool calls they teach.
type Inspectable interface {
	Template
	// Reads reports whether the template reads the variable name.
	Reads(name string) bool
	// Source returns the template's text.
	Source() string
}

// Options controls one Render call.
type Options struct {
	// AddGenerationPrompt appends the marker that opens the assistant's
	// turn, so that the model continues as the assistant. Serving sets
	// it; see DefaultOptions. Templates that always add the marker (some
	// Jinja templates ignore add_generation_prompt) add it regardless.
	AddGenerationPrompt bool

	// Vars holds extra template variables from the request, such as
	// enable_thinking. A Jinja template receives them as top-level
	// variables; a variable the template never reads is an
	// ErrUnsupported error, and so is any variable on a conversation
	// template, which has no variables.
	Vars map[string]any

	// Tools holds the request's tools, each an OpenAI tool object such
	// as {"type":"function","function":{...}}. A template that does not
	// read tools rejects a non-empty list with ErrUnsupported. A caller
	// that honours tool_choice "none" passes no tools.
	Tools []json.RawMessage

	// ToolChoice names the function the request's tool_choice names, ""
	// when it names none. An MLC conversation template then offers that
	// function alone, as mlc_llm serve does; Jinja templates get every
	// tool, as vLLM's and SGLang's servers give them.
	ToolChoice string
}

// DefaultOptions returns the options for serving a chat completion: the
// generation prompt on, no variables and no tools.
func DefaultOptions() Options {
	return Options{AddGenerationPrompt: true}
}

// firstKey returns the smallest key of a non-empty map, so that error
// messages naming one of several variables are deterministic.
func firstKey(m map[string]any) string {
	return slices.Min(slices.Collect(maps.Keys(m)))
}
