package protocol

import (
	"encoding/json"
	"slices"
	"testing"
)

// responsesChat is the chat request of a Responses request body.
func responsesChat(body string) (*ChatCompletionRequest, *Error) {
	var rr ResponsesRequest
	if e := DecodeJSON([]byte(body), &rr); e != nil {
		return nil, e
	}
	if e := rr.Validate(); e != nil {
		return nil, e
	}
	items, e := rr.Items()
	if e != nil {
		return nil, e
	}
	return rr.Chat(nil, items)
}

// responsesWith is a Responses request body with the tools f, g and
// web_search and the tool choice given.
func responsesWith(choice string) string {
	return `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"web_search"},{"type":"function","name":"g","parameters":{"type":"object"}}],"tool_choice":` + choice + `}`
}

// chatAllowed is a chat request body with the tools f, g and h and chat's
// allowed_tools choice of mode over tools (a JSON array's members).
func chatAllowed(mode, tools string) string {
	fn := func(n string) string { return `{"type":"function","function":{"name":"` + n + `"}}` }
	return chatWith(userHi, `"tools":[`+fn("f")+`,`+fn("g")+`,`+fn("h")+`],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":`+mode+`,"tools":[`+tools+`]}}`)
}

// TestAllowedToolsValid: both APIs' allowed_tools become the chat
// request's AllowedTools, with the mode as its tool choice; the
// Responses API's passes over tools of the types it does not run.
func TestAllowedToolsValid(t *testing.T) {
	f, g := `{"type":"function","function":{"name":"f"}}`, `{"type":"function","function":{"name":"g"}}`
	for _, c := range []struct {
		name, body string
		responses  bool
		choice     string
		allowed    []string
	}{
		{"chat required", chatAllowed(`"required"`, g), false, ToolChoiceRequired, []string{"g"}},
		{"chat auto", chatAllowed(`"auto"`, f+","+g+","+g), false, ToolChoiceAuto, []string{"f", "g"}},
		{"responses required", responsesWith(`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"g"},{"type":"web_search"}]}`), true, ToolChoiceRequired, []string{"g"}},
		{"responses auto", responsesWith(`{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}]}`), true, ToolChoiceAuto, []string{"f", "g"}},
		{"responses auto of no function", responsesWith(`{"type":"allowed_tools","mode":"auto","tools":[{"type":"web_search"}]}`), true, ToolChoiceAuto, nil},
		{"chat named function", chatWith(userHi, `"tools":[`+f+`],"tool_choice":{"type":"function","function":{"name":"f"}}`), false, ToolChoiceFunction, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			decode := decodeChat
			if c.responses {
				decode = responsesChat
			}
			creq, e := decode(c.body)
			if e != nil {
				t.Fatal(e)
			}
			if !slices.Equal(creq.AllowedTools, c.allowed) {
				t.Errorf("AllowedTools %q, want %q", creq.AllowedTools, c.allowed)
			}
			tc := creq.ToolCalling("hermes")
			if tc == nil || tc.Choice != c.choice {
				t.Fatalf("ToolCalling %+v, want choice %q", tc, c.choice)
			}
			if tc.Forced() != (c.choice != ToolChoiceAuto) {
				t.Errorf("Forced %v for %q", tc.Forced(), c.choice)
			}
			// The tools all stay in the prompt.
			if want := 2; c.responses && len(creq.Tools) != want {
				t.Errorf("%d tools, want %d: %q", len(creq.Tools), want, creq.Tools)
			}
		})
	}
}

// TestAllowedToolsErrors: a bad allowed_tools choice is a 400 naming its
// member, in each API's shape.
func TestAllowedToolsErrors(t *testing.T) {
	f := `{"type":"function","function":{"name":"f"}}`
	for _, c := range []struct {
		name, body string
		responses  bool
		param      string
		code, msg  string
	}{
		{"chat mode", chatAllowed(`"any"`, f), false, "tool_choice.allowed_tools.mode", CodeInvalidValue, `"auto" or "required"`},
		{"chat mode none", chatAllowed(`"none"`, f), false, "tool_choice.allowed_tools.mode", CodeInvalidValue, `got "none"`},
		{"chat no mode", chatWith(userHi, `"tools":[`+f+`],"tool_choice":{"type":"allowed_tools","allowed_tools":{"tools":[`+f+`]}}`), false, "tool_choice.allowed_tools.mode", CodeMissingParameter, "is required"},
		{"chat unknown tool", chatAllowed(`"required"`, f+`,{"type":"function","function":{"name":"x"}}`), false, "tool_choice.allowed_tools.tools[1].function.name", CodeInvalidValue, `"x"`},
		{"chat a custom tool", chatAllowed(`"required"`, `{"type":"custom","custom":{"name":"f"}}`), false, "tool_choice.allowed_tools.tools[0].type", CodeInvalidValue, `"function"`},
		{"chat tool without name", chatAllowed(`"auto"`, `{"type":"function","function":{}}`), false, "tool_choice.allowed_tools.tools[0].function.name", CodeMissingParameter, "is required"},
		{"chat tool not an object", chatAllowed(`"auto"`, `"f"`), false, "tool_choice.allowed_tools.tools[0]", CodeInvalidType, "must be a tool"},
		{"chat no tools", chatAllowed(`"auto"`, ``), false, "tool_choice.allowed_tools.tools", CodeEmptyArray, "must not be empty"},
		{"chat tools absent", chatWith(userHi, `"tools":[`+f+`],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto"}}`), false, "tool_choice.allowed_tools.tools", CodeMissingParameter, "is required"},
		{"chat the Responses shape", chatWith(userHi, `"tools":[`+f+`],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"}]}`), false, "tool_choice.allowed_tools", CodeMissingParameter, "is required"},
		{"chat a key in another case", chatWith(userHi, `"tools":[`+f+`],"tool_choice":{"type":"allowed_tools","allowed_tools":{"Mode":"auto","tools":[`+f+`]}}`), false, "tool_choice.allowed_tools", CodeInvalidValue, "case-sensitive"},
		{"chat another type", chatWith(userHi, `"tools":[`+f+`],"tool_choice":{"type":"custom","custom":{"name":"f"}}`), false, "tool_choice.type", CodeInvalidValue, `"function" or "allowed_tools"`},
		{"responses mode", responsesWith(`{"type":"allowed_tools","mode":"none","tools":[{"type":"function","name":"f"}]}`), true, "tool_choice.mode", CodeInvalidValue, `"auto" or "required"`},
		{"responses unknown tool", responsesWith(`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"f"},{"type":"function","name":"x"}]}`), true, "tool_choice.tools[1].name", CodeInvalidValue, `"x"`},
		{"responses tool without type", responsesWith(`{"type":"allowed_tools","mode":"auto","tools":[{"name":"f"}]}`), true, "tool_choice.tools[0].type", CodeMissingParameter, "is required"},
		{"responses tool without name", responsesWith(`{"type":"allowed_tools","mode":"auto","tools":[{"type":"function"}]}`), true, "tool_choice.tools[0].name", CodeMissingParameter, "is required"},
		{"responses no tools", responsesWith(`{"type":"allowed_tools","mode":"required","tools":[]}`), true, "tool_choice.tools", CodeEmptyArray, "must not be empty"},
		{"responses tools an object", responsesWith(`{"type":"allowed_tools","mode":"required","tools":{}}`), true, "tool_choice.tools", CodeInvalidType, "got an object"},
		{"responses required of no function", responsesWith(`{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}`), true, "tool_choice.tools", CodeInvalidValue, "no function tool"},
		{"responses the chat shape", responsesWith(`{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}`), true, "tool_choice.mode", CodeMissingParameter, "is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			decode := decodeChat
			if c.responses {
				decode = responsesChat
			}
			_, e := decode(c.body)
			checkError(t, e, c.param, c.code, c.msg)
		})
	}
}

// TestAllowedToolsCallFormat: the schema of a call required over
// allowed tools admits the calls of those tools alone, and checks the
// schemas of those alone; one allowed tool's call is that tool's, as a
// named function's is.
func TestAllowedToolsCallFormat(t *testing.T) {
	weather := `{"name":"get_weather","arguments":{"where":{"city":"Paris"},"unit":"c"}}`
	count := `{"name":"count","arguments":{"n":3,"const":{"$ref":"#/definitions/place"}}}`
	ping := `{"name":"ping","arguments":{}}`
	allowed := func(mode string, names ...string) string {
		return string(chatAllowedTools(mode, names))
	}
	for _, c := range []struct {
		choice  string
		ok, not []string
		names   []string // the consts of the schema's names
	}{
		{allowed("required", "count", "ping"), []string{count, ping}, []string{weather}, []string{"count", "ping"}},
		{allowed("required", "get_weather"), []string{weather}, []string{count, ping}, []string{"get_weather"}},
		{allowed("auto", "get_weather"), nil, nil, nil},
	} {
		r := toolFormatRequest(t, c.choice)
		rf, e := r.ToolCallFormat("arguments")
		if e != nil {
			t.Fatalf("%s: %v", c.choice, e)
		}
		if !checkCallFormat(t, c.choice, rf, c.ok, c.not) {
			continue
		}
		if got := nameConsts(t, *rf.Schema); !slices.Equal(got, c.names) {
			t.Errorf("%s: the schema's names %q, want %q: %s", c.choice, got, c.names, *rf.Schema)
		}
	}

	// The schema of a tool not allowed is not the grammar's business.
	bad := `{"type":"object","properties":{"when":{"type":"array","contains":{},"maxContains":1}},"required":["when"]}`
	tools := `"tools":[{"type":"function","function":{"name":"ok"}},{"type":"function","function":{"name":"f","parameters":` + bad + `}}],"tool_choice":`
	for _, c := range []struct {
		names []string
		param string
	}{{[]string{"ok"}, ""}, {[]string{"ok", "f"}, "tools[1].function.parameters.properties.when.maxContains"}} {
		r, e := decodeChat(chatWith(userHi, tools+allowed("required", c.names...)))
		if e != nil {
			t.Fatal(e)
		}
		_, e = r.ToolCallFormat("arguments")
		if c.param == "" && e != nil || c.param != "" && (e == nil || deref(e.Param) != c.param) {
			t.Errorf("allowed %q: %v, want param %q", c.names, e, c.param)
		}
	}
}

// nameConsts are the consts of the "name" properties of a call schema's
// alternatives, in order.
func nameConsts(t *testing.T, schema string) []string {
	t.Helper()
	type call struct {
		Properties struct {
			Name struct {
				Const string `json:"const"`
			} `json:"name"`
		} `json:"properties"`
	}
	var s struct {
		call
		AnyOf []call `json:"anyOf"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	if s.AnyOf == nil {
		return []string{s.Properties.Name.Const}
	}
	var out []string
	for _, c := range s.AnyOf {
		out = append(out, c.Properties.Name.Const)
	}
	return out
}
