package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
)

func FuzzDecodeCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hello","max_tokens":3}`,
		`{"prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"a","logit_bias":{"1":5},"stop":["x","y"],"extra":{"k":[1]}}`,
		`{"prompt":"a","debug_config":{"disagg_config":{"kind":"remote_send","kv_window_begin":-1}}}`,
		`{"prompt":`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := DecodeCompletionRequest(bytes.NewReader(body), 1<<16)
		if e != nil {
			if e.Status != 400 || e.Message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		// A valid request re-encodes to one that decodes to the same thing.
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, e := DecodeCompletionRequest(bytes.NewReader(out), 1<<20)
		if e != nil {
			t.Fatalf("re-encoded request rejected: %v\n%s", e, out)
		}
		out2, _ := json.Marshal(again)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
		// What the router forwards, MLC-LLM's model accepts.
		if err := mlcschema.CheckCompletionRequest(out); err != nil {
			t.Fatalf("valid request that MLC would reject: %v\n%s", err, out)
		}
	})
}

func FuzzValidateChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":"y"}],"n":2,"stop":["a"]}`,
		`{"messages":[{"role":"tool","content":"z","tool_call_id":"c"}],"logprobs":true,"top_logprobs":3}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"messages":[{"role":"wizard","content":null}]}`,
		`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r","tool_call_id":"c"}],"tools":[{"type":"function","function":{"name":"f","strict":true}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{},"debug_config":{"special_request":"query_engine_metrics"}}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"f"}}]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ChatCompletionRequest
		e := DecodeJSON(body, &req)
		if e == nil {
			e = req.Validate()
		}
		if e != nil {
			if e.Status != 400 || e.Message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := mlcschema.CheckChatRequest(asMLCTakesTools(t, out)); err != nil {
			t.Fatalf("valid request that MLC would reject: %v\n%s", err, out)
		}
	})
}

// asMLCTakesTools is a chat request with the tool calling the router
// serves beyond MLC's models (TestValidateAcceptsBeyondMLC) written as
// MLC takes it: a function without parameters gets empty ones,
// tool_choice "required" and allowed_tools are "auto", an assistant turn's tool_calls are
// dropped (its content "" when it had none). The rest must be MLC's.
func asMLCTakesTools(t *testing.T, body []byte) []byte {
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if c, _ := req["tool_choice"].(map[string]any); req["tool_choice"] == ToolChoiceRequired || c != nil && c["type"] == toolChoiceAllowedTools {
		req["tool_choice"] = ToolChoiceAuto
	}
	tools, _ := req["tools"].([]any)
	for _, tool := range tools {
		if fn, ok := tool.(map[string]any)["function"].(map[string]any); ok && fn["parameters"] == nil {
			fn["parameters"] = map[string]any{}
		}
	}
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		if m, ok := m.(map[string]any); ok && m["tool_calls"] != nil {
			delete(m, "tool_calls")
			if m["content"] == nil {
				m["content"] = ""
			}
		}
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func FuzzDecodeEmbeddingRequest(f *testing.F) {
	for _, s := range []string{
		`{"input":"hello","model":"tiny-embed"}`,
		`{"input":["a",""],"encoding_format":"base64","dimensions":8}`,
		`{"input":[1,2,3],"user":"u","extra":{"k":[1]}}`,
		`{"input":[[1],[],[2,3]],"encoding_format":"float"}`,
		`{"input":[1,null]}`, `{"input":[]}`, `{"input":[[1],"a"]}`, `{"input":`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := DecodeEmbeddingRequest(bytes.NewReader(body), 1<<16)
		if e != nil {
			if e.Status != 400 || e.Message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if n := req.Input.Len(); n == 0 || n > MaxEmbeddingInputs || (!req.Input.List && n != 1) {
			t.Fatalf("accepted %d inputs (list %v)", n, req.Input.List)
		}
		// A valid request re-encodes to one that decodes to the same thing.
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, e := DecodeEmbeddingRequest(bytes.NewReader(out), 1<<20)
		if e != nil {
			t.Fatalf("re-encoded request rejected: %v\n%s", e, out)
		}
		out2, _ := json.Marshal(again)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
		// What the router forwards, MLC-LLM's model accepts.
		if err := mlcschema.CheckEmbeddingRequest(out); err != nil {
			t.Fatalf("valid request that MLC would reject: %v\n%s", err, out)
		}
	})
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		": c\r\ndata: x\r\n\r\n",
		"data:a\rdata:b\r\r",
		"event: e\nid: 1\nretry: 5\ndata\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 256
		// However the input is split into reads, the events are the same.
		whole := readEvents(t, NewSSEReader(bytes.NewReader(in), max), max, len(in))
		bytewise := readEvents(t, NewSSEReader(iotest.OneByteReader(bytes.NewReader(in)), max), max, len(in))
		if !slices.Equal(whole, bytewise) {
			t.Fatalf("events read whole %q, byte by byte %q", whole, bytewise)
		}
	})
}

// readEvents reads r, whose events are at most max bytes, to its end: the
// events, then the error that ended it.
func readEvents(t *testing.T, r *SSEReader, max, inputLen int) []string {
	var out []string
	for i := 0; ; i++ {
		d, err := r.Next()
		if err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return append(out, "error: "+err.Error())
		}
		if len(d) > max {
			t.Fatalf("event of %d bytes over the limit", len(d))
		}
		if i > inputLen {
			t.Fatal("more events than input bytes")
		}
		out = append(out, string(d))
	}
}
