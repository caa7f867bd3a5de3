package toolcall

import (
	"encoding/json"
	"strings"
)

// parseHermes reads the body between <tool_call> and </tool_call>: one JSON
// call object, with any whitespace around it (Qwen puts it on its own line).
func parseHermes(body string) ([]Call, bool) {
	body = strings.TrimSpace(body)
	if !json.Valid([]byte(body)) {
		return nil, false
	}
	c, ok := jsonCall([]byte(body))
	if !ok {
		return nil, false
	}
	return []Call{c}, true
}
