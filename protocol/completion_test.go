package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCompletionRequestRoundTripKeepsUnknownFields(t *testing.T) {
	in := `{"model":"m","prompt":"hi","max_tokens":5,"temperature":0,"vendor_knob":{"a":[1,2]},"logit_bias":{"7":-3},"stop":"x","zz":null}`
	var req CompletionRequest
	if err := json.Unmarshal([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	if !req.Prompt.IsText || req.Prompt.Text != "hi" || *req.MaxTokens != 5 || *req.Temperature != 0 {
		t.Fatalf("known fields decoded wrong: %+v", req)
	}
	if len(req.Extra) != 2 {
		t.Fatalf("extra = %v, want vendor_knob and zz", req.Extra)
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	_ = json.Unmarshal([]byte(in), &a)
	_ = json.Unmarshal(out, &b)
	a["stop"] = []any{"x"} // a single stop string is normalised to a list
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip lost data:\n in  %v\n out %v", a, b)
	}
}

func TestPromptForms(t *testing.T) {
	for _, tc := range []struct {
		in      string
		text    bool
		ids     []int
		wantErr bool
	}{
		{`"abc"`, true, nil, false},
		{`[1,2,3]`, false, []int{1, 2, 3}, false},
		{`[]`, false, []int{}, false},
		{`[1,"a"]`, false, nil, true},
		{`{"a":1}`, false, nil, true},
		{`3`, false, nil, true},
	} {
		var p Prompt
		err := json.Unmarshal([]byte(tc.in), &p)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: err = %v", tc.in, err)
		}
		if err != nil {
			continue
		}
		if p.IsText != tc.text || (!tc.text && !reflect.DeepEqual(p.IDs, tc.ids)) {
			t.Fatalf("%s: got %+v", tc.in, p)
		}
		back, _ := json.Marshal(p)
		if string(back) != tc.in {
			t.Fatalf("%s: re-encoded as %s", tc.in, back)
		}
	}
}

func TestMicroservingRequestsCarryTheirFields(t *testing.T) {
	base := CompletionRequest{Prompt: TokenPrompt([]int{1, 2, 3}), Extra: Extra{"keep": json.RawMessage(`true`)}}
	cases := []struct {
		v    any
		back any
		want []string
	}{
		{PrepRecvRequest{base, -1}, &PrepRecvRequest{}, []string{`"end":-1`}},
		{RemoteSendRequest{base, 1, 2, "abc", 3}, &RemoteSendRequest{}, []string{`"begin":1`, `"end":2`, `"kv_addr_info":"abc"`, `"recv_rank":3`}},
		{StartGenerateRequest{base, 2}, &StartGenerateRequest{}, []string{`"begin":2`}},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range append(c.want, `"keep":true`, `"prompt":[1,2,3]`) {
			if !strings.Contains(string(b), w) {
				t.Fatalf("%s lacks %s", b, w)
			}
		}
		if err := json.Unmarshal(b, c.back); err != nil {
			t.Fatal(err)
		}
		if got := reflect.ValueOf(c.back).Elem().Interface(); !reflect.DeepEqual(got, c.v) {
			t.Fatalf("round trip:\n got  %+v\n want %+v", got, c.v)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	r := &CompletionRequest{Prompt: TokenPrompt([]int{1}), Stop: StopList{"a"}, LogitBias: map[string]float64{"1": 1},
		DebugConfig: &DebugConfig{DisaggConfig: &DisaggConfig{Kind: DisaggRemoteSend}}, Extra: Extra{"x": json.RawMessage(`1`)}}
	c := r.Clone()
	c.Prompt.IDs[0] = 9
	c.Stop[0] = "b"
	c.LogitBias["1"] = 2
	c.DebugConfig.DisaggConfig.Kind = "other"
	delete(c.Extra, "x")
	if r.Prompt.IDs[0] != 1 || r.Stop[0] != "a" || r.LogitBias["1"] != 1 || r.DebugConfig.DisaggConfig.Kind != DisaggRemoteSend || r.Extra["x"] == nil {
		t.Fatalf("clone shares state with the original: %+v", r)
	}
}

func TestKVAppendMetadata(t *testing.T) {
	m := KVAppendMetadata{{{Start: 32, Length: 16}, {Start: 80, Length: 3}}, {}}
	s := m.Encode()
	got, err := DecodeKVAppendMetadata(s, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], m[0]) || len(got[1]) != 0 || got.Tokens(0) != 19 {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"!!", "W10=", "WzJd", "WzEsLTEsMV0=", "WzEsMSwxLDld"} {
		if _, err := DecodeKVAppendMetadata(bad, 1); err == nil {
			t.Fatalf("%q decoded without error", bad)
		}
	}
}

// Decoding into a used value resets what the new body leaves out, and
// keeps only the new body's unknown fields.
func TestDecodeResetsAbsentFields(t *testing.T) {
	var r CompletionRequest
	if err := json.Unmarshal([]byte(`{"prompt":"a","n":2,"old":1}`), &r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"prompt":"b","new":2}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.N != nil || r.Prompt.Text != "b" || len(r.Extra) != 1 || r.Extra["new"] == nil {
		t.Fatalf("got %+v", r)
	}
}

// A microserving field of the wrong type is a decode error naming it.
func TestMicroservingFieldTypes(t *testing.T) {
	var p PrepRecvRequest
	e := DecodeJSON([]byte(`{"prompt":[1],"end":"x"}`), &p)
	if e == nil || e.Param == nil || *e.Param != "end" {
		t.Fatalf("got %v", e)
	}
	var s RemoteSendRequest
	if e := DecodeJSON([]byte(`{"prompt":[1],"begin":0,"end":1,"kv_addr_info":5,"recv_rank":1}`), &s); e == nil || *e.Param != "kv_addr_info" {
		t.Fatalf("got %v", e)
	}
	if e := DecodeJSON([]byte(`{"prompt":[1]}`), &p); e != nil || p.End != -1 {
		t.Fatalf("end defaults to -1: %+v %v", p, e)
	}
}

// prompt_cache_key on a completion is the router's, never an engine's:
// it moves to SessionKey; a key that is no string is a 400 naming it.
func TestTakeSessionKey(t *testing.T) {
	var req CompletionRequest
	if err := json.Unmarshal([]byte(`{"prompt":[1,2],"prompt_cache_key":"thread-7","max_tokens":3}`), &req); err != nil {
		t.Fatal(err)
	}
	if e := req.TakeSessionKey(); e != nil || req.SessionKey != "thread-7" {
		t.Fatalf("TakeSessionKey: %v, key %q", e, req.SessionKey)
	}
	if b, _ := json.Marshal(req); strings.Contains(string(b), "thread-7") || strings.Contains(string(b), KeyPromptCacheKey) {
		t.Errorf("forwarded %s, want no prompt_cache_key", b)
	}
	var bad CompletionRequest
	if err := json.Unmarshal([]byte(`{"prompt":[1],"prompt_cache_key":7}`), &bad); err != nil {
		t.Fatal(err)
	}
	if e := bad.TakeSessionKey(); e == nil || e.Param == nil || *e.Param != KeyPromptCacheKey {
		t.Errorf("a number: %v, want a 400 naming prompt_cache_key", e)
	}
}
