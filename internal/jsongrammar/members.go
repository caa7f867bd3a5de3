package jsongrammar

import (
	"bytes"
	"encoding/json"
)

// Member is a member of a JSON object, in document order (a schema's
// keywords, its properties: order matters to what is generated).
type Member struct {
	Key   string
	Value json.RawMessage
}

// Members returns the members of a JSON object in order; false when raw
// is not one.
func Members(raw json.RawMessage) ([]Member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if d, ok := t.(json.Delim); err != nil || !ok || d != '{' {
		return nil, false
	}
	var out []Member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, Member{t.(string), v})
	}
	return out, true
}
