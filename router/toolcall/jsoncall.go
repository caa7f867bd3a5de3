package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// jsonCall reads one {"name": …, "arguments"|"parameters": …} object, the
// call shape that hermes, llama3_json and mistral share. Keys are matched
// exactly (a map, not a struct, so "NAME" is not "name"), and other keys are
// ignored, as the reference parsers ignore them.
func jsonCall(raw []byte) (Call, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return Call{}, false
	}
	var name string
	if json.Unmarshal(obj["name"], &name) != nil || name == "" {
		return Call{}, false
	}
	args, ok := obj["arguments"]
	if !ok {
		args = obj["parameters"]
	}
	compact, ok := jsonArguments(args)
	if !ok {
		return Call{}, false
	}
	return Call{Name: name, Arguments: compact}, true
}

// parseJSONCall reads the whole output as one JSON call object (the JSON
// format), white space around it allowed.
func parseJSONCall(output string) ([]Call, bool) {
	body := []byte(strings.TrimSpace(output))
	if !json.Valid(body) {
		return nil, false
	}
	c, ok := jsonCall(body)
	if !ok {
		return nil, false
	}
	return []Call{c}, true
}

// jsonArguments makes a call's arguments a compact JSON object: an object
// as is, a JSON string that holds an object (some models quote it), and
// "{}" for none or null. Anything else is not a call's arguments.
func jsonArguments(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", true
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		raw = []byte(strings.TrimSpace(s))
	}
	return compactObject(raw)
}

// compactObject returns raw compacted when it is one valid JSON object.
func compactObject(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return "", false
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "", false
	}
	return b.String(), true
}
