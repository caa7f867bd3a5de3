package toolcall

import (
	"fmt"
	"strings"
)

// Call is one parsed tool call.
type Call struct {
	Name string
	// Arguments is a JSON object, compact: json.Compact of what the model
	// wrote, or "{}" when it gave none.
	Arguments string
}

// Event is what a Parser gives back: text that is content, or one whole call.
type Event struct {
	Text string // content text (when Call is nil)
	Call *Call
}

// Parser reads one choice's generated text. Not safe for concurrent use.
type Parser interface {
	// Push takes the next piece and returns the events now certain; text
	// it cannot yet tell from a call's start is held.
	Push(text string) []Event
	// End says generation ended and returns everything held, as calls or text.
	End() []Event
}

// maxHeld bounds the bytes a parser holds for one call in progress, so a
// model that never closes its call cannot make the router buffer without end.
const maxHeld = 1 << 20

// Formats returns the format names New accepts.
func Formats() []string {
	return []string{"hermes", "llama3_json", "mistral", "pythonic", "mlc"}
}

// JSON is the format of an answer written under the router's tool-call
// grammar (a request that requires a call, protocol.ToolCallFormat): the
// whole output is one {"name": …, "arguments"|"parameters": …} object.
// It is no model's own syntax, so it is not among Formats: New takes it.
const JSON = "json"

// ArgumentsKey is the member that holds a call's arguments in the syntax
// format names: Llama 3's "parameters", else "arguments". A call written
// under the tool-call grammar uses it, to stay close to what the model
// was taught.
func ArgumentsKey(format string) string {
	if format == "llama3_json" {
		return "parameters"
	}
	return "arguments"
}

// New returns a Parser for the named format (one of Formats, or JSON).
func New(format string) (Parser, error) {
	return newParser(format, maxHeld)
}

// newParser is New with the hold bound as a parameter, so tests can reach
// the bound with small inputs.
func newParser(format string, limit int) (Parser, error) {
	switch format {
	case "hermes":
		return newTagged("<tool_call>", "</tool_call>", parseHermes, limit), nil
	case "mistral":
		return newTagged(mistralTag, "", parseMistral, limit), nil
	case "llama3_json":
		return newWhole(llama3CouldStart, parseLlama3, limit), nil
	case "pythonic":
		return newWhole(pythonicCouldStart, parsePythonic, limit), nil
	case "mlc":
		w := newWhole(mlcCouldStart, parseMLC, limit)
		w.startLen = mlcStartLen
		return w, nil
	case JSON:
		return newWhole(func(t string) bool { return t[0] == '{' }, parseJSONCall, limit), nil
	}
	return nil, fmt.Errorf("toolcall: unknown format %q (valid: %s)", format, strings.Join(Formats(), ", "))
}

// textEvent appends s as a text event, leaving out empty text.
func textEvent(evs []Event, s string) []Event {
	if s == "" {
		return evs
	}
	return append(evs, Event{Text: s})
}

// callEvents appends one event per call.
func callEvents(evs []Event, calls []Call) []Event {
	for i := range calls {
		evs = append(evs, Event{Call: &calls[i]})
	}
	return evs
}
