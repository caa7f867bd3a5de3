package chat

import (
	"encoding/json"
	"testing"
)

func TestMessageJSON(t *testing.T) {
	tests := []struct {
		in      string
		text    string
		isParts bool
		isNull  bool
	}{
		{`{"role":"user","content":"hi"}`, "hi", false, false},
		{`{"role":"user","content":""}`, "", false, false},
		{`{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"b"}]}`, "ab", true, false},
		{`{"role":"user","content":[]}`, "", true, false},
		{`{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}`, "", false, true},
		{`{"role":"assistant"}`, "", false, false},
	}
	for _, tt := range tests {
		var m Message
		if err := json.Unmarshal([]byte(tt.in), &m); err != nil {
			t.Fatalf("Unmarshal(%s): %v", tt.in, err)
		}
		if m.Content.String() != tt.text || m.Content.IsParts() != tt.isParts || m.Content.IsNull() != tt.isNull {
			t.Errorf("Unmarshal(%s): content %q parts=%v null=%v", tt.in, m.Content.String(), m.Content.IsParts(), m.Content.IsNull())
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		var back Message
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", out, err)
		}
		if back.Content.String() != tt.text || back.Content.IsParts() != tt.isParts || back.Content.IsNull() != tt.isNull {
			t.Errorf("round trip of %s via %s changed the content", tt.in, out)
		}
	}
	if b, _ := json.Marshal(ContentPart{Type: "text"}); string(b) != `{"type":"text","text":""}` {
		t.Errorf("Marshal of an empty text part = %s", b)
	}
	for _, bad := range []string{`{"content":1}`, `{"content":{"type":"text"}}`, `{"content":[1]}`, `{"content":true}`} {
		var m Message
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("Unmarshal(%s) succeeded, want an error", bad)
		}
	}
}
