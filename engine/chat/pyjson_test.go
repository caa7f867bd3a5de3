package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Expected strings are what Python 3 prints for json.dumps(json.loads(in)).
func TestWritePyJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1,"a":[true,false,null]}`, `{"b": 1, "a": [true, false, null]}`},
		{`"Köln 日本 🙂"`, `"K\u00f6ln \u65e5\u672c \ud83d\ude42"`},
		{`"tab\tnl\ncr\rq\"bs\\ del\u007f nul\u0000 sl/"`, `"tab\tnl\ncr\rq\"bs\\ del\u007f nul\u0000 sl/"`},
		{`[1.5, 1.0, 1e5, 1e16, 1e17, 0.0001, 0.00001, -2.5e-7, 123456789012345678901234567890, -0, 1E400]`,
			`[1.5, 1.0, 100000.0, 1e+16, 1e+17, 0.0001, 1e-05, -2.5e-07, 123456789012345678901234567890, 0, Infinity]`},
		{`{}`, `{}`},
		{`[]`, `[]`},
		{`[[],{"":{}}]`, `[[], {"": {}}]`},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := writePyJSON(&b, json.RawMessage(tt.in)); err != nil {
			t.Fatalf("writePyJSON(%s): %v", tt.in, err)
		}
		if got := b.String(); got != tt.want {
			t.Errorf("writePyJSON(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
	var b strings.Builder
	if err := writePyJSON(&b, json.RawMessage(`{} {}`)); err == nil {
		t.Error("writePyJSON accepted trailing data")
	}
}

func TestMLCFunctionString(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"parameters":{"type":"object"},"name":"a","strict":true}}`),
		json.RawMessage(`{"type":"function","function":{"name":"b","description":"d","parameters":{}}}`),
	}
	got, err := mlcFunctionString(tools)
	if err != nil {
		t.Fatal(err)
	}
	// pydantic's field order, description null when absent, extra fields dropped.
	want := `[{"description": null, "name": "a", "parameters": {"type": "object"}}, {"description": "d", "name": "b", "parameters": {}}]`
	if got != want {
		t.Errorf("mlcFunctionString\n got %s\nwant %s", got, want)
	}
	for _, bad := range []string{`{"type":"function","function":{"name":"a"}}`, `{"type":"function"}`, `{"type":"code"}`, `[]`} {
		if _, err := mlcFunctionString([]json.RawMessage{json.RawMessage(bad)}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("mlcFunctionString(%s): err = %v, want ErrUnsupported", bad, err)
		}
	}
}
