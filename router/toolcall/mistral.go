package toolcall

import (
	"encoding/json"
	"strings"
)

// mistralTag starts Mistral's tool calls; what follows it is held to End.
const mistralTag = "[TOOL_CALLS]"

// mistralArgs separates name from arguments in the newer Mistral form.
const mistralArgs = "[ARGS]"

// parseMistral reads what follows the first [TOOL_CALLS]: either a JSON
// array of call objects, or the newer name[ARGS]{…} form, repeated, each
// after its own [TOOL_CALLS]. All or nothing.
func parseMistral(body string) ([]Call, bool) {
	t := strings.TrimSpace(body)
	if strings.HasPrefix(t, "[") {
		return mistralArray(t)
	}
	return mistralNamed(t)
}

func mistralArray(t string) ([]Call, bool) {
	var raws []json.RawMessage
	if json.Unmarshal([]byte(t), &raws) != nil || len(raws) == 0 {
		return nil, false
	}
	calls := make([]Call, 0, len(raws))
	for _, raw := range raws {
		c, ok := jsonCall(raw)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

func mistralNamed(t string) ([]Call, bool) {
	var calls []Call
	for t != "" {
		i := strings.Index(t, mistralArgs)
		if i < 0 || !isFuncName(t[:i]) {
			return nil, false
		}
		raw, rest, ok := nextJSON(t[i+len(mistralArgs):])
		if !ok {
			return nil, false
		}
		args, ok := compactObject(raw)
		if !ok {
			return nil, false
		}
		calls = append(calls, Call{Name: t[:i], Arguments: args})
		t = strings.TrimLeft(rest, spaceChars)
		t = strings.TrimLeft(strings.TrimPrefix(t, mistralTag), spaceChars)
	}
	return calls, len(calls) > 0
}

// isFuncName reports whether s looks like a tool name: non-empty, and only
// letters, digits, '_', '-' and '.' (the characters OpenAI allows, and dots).
func isFuncName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		ok := r == '_' || r == '-' || r == '.' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
