package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
)

func TestDecodeEmbeddingRequestErrors(t *testing.T) {
	tooMany := `{"input":[` + strings.Repeat(`"a",`, MaxEmbeddingInputs) + `"a"]}`
	for _, c := range []struct {
		name, body  string
		status      int
		param, code string
		msg         string
	}{
		{"malformed", `{"input":"a",`, 400, "", "", "invalid JSON"},
		{"not an object", `["a"]`, 400, "", "", "JSON object"},
		{"missing input", `{"model":"m"}`, 400, "input", CodeMissingParameter, "input is required"},
		{"null input", `{"input":null}`, 400, "input", CodeMissingParameter, "input is required"},
		{"empty list", `{"input":[]}`, 400, "input", CodeEmptyArray, "must not be an empty array"},
		{"empty list with space", `{"input":[ ]}`, 400, "input", CodeEmptyArray, "must not be an empty array"},
		{"number", `{"input":5}`, 400, "input", CodeInvalidType, "input must be a string, an array of strings"},
		{"object", `{"input":{"text":"a"}}`, 400, "input", CodeInvalidType, "input must be"},
		{"strings then a number", `{"input":["a",1]}`, 400, "input", CodeInvalidType, "input must be"},
		{"ids then a string", `{"input":[1,"a"]}`, 400, "input", CodeInvalidType, "input must be"},
		{"id lists then a string", `{"input":[[1],"a"]}`, 400, "input", CodeInvalidType, "input must be"},
		{"a null string", `{"input":["a",null]}`, 400, "input", CodeInvalidType, "input must be"},
		{"a null id", `{"input":[1,null]}`, 400, "input", CodeInvalidType, "input must be"},
		{"a null id list", `{"input":[[1],null]}`, 400, "input", CodeInvalidType, "input must be"},
		{"a null in an id list", `{"input":[[1,null]]}`, 400, "input", CodeInvalidType, "input must be"},
		{"fractional id", `{"input":[1.5]}`, 400, "input", CodeInvalidType, "input must be"},
		{"nested too deep", `{"input":[[[1]]]}`, 400, "input", CodeInvalidType, "input must be"},
		{"negative id", `{"input":[3,-1]}`, 400, "input[1]", CodeIntegerBelowMin, "input[1]: token id -1 is negative"},
		{"negative id in a list", `{"input":[[1],[2,-7]]}`, 400, "input[1][1]", CodeIntegerBelowMin, "token id -7 is negative"},
		{"too many inputs", tooMany, 400, "input", CodeArrayTooLong, "at most 2048 items, got 2049"},
		{"encoding_format", `{"input":"a","encoding_format":"binary"}`, 400, "encoding_format", CodeInvalidValue, `"float" or "base64"`},
		{"encoding_format type", `{"input":"a","encoding_format":1}`, 400, "encoding_format", CodeInvalidType, "expected a string"},
		{"dimensions zero", `{"input":"a","dimensions":0}`, 400, "dimensions", CodeIntegerBelowMin, "at least 1"},
		{"dimensions negative", `{"input":"a","dimensions":-3}`, 400, "dimensions", CodeIntegerBelowMin, "at least 1"},
		{"dimensions a string", `{"input":"a","dimensions":"8"}`, 400, "dimensions", CodeInvalidType, "expected an integer"},
		{"dimensions a fraction", `{"input":"a","dimensions":1.5}`, 400, "dimensions", CodeInvalidType, "expected an integer"},
		{"model a number", `{"input":"a","model":5}`, 400, "model", CodeInvalidType, "expected a string"},
		{"user a number", `{"input":"a","user":5}`, 400, "user", CodeInvalidType, "expected a string"},
		{"a field in another case", `{"Input":"a"}`, 400, "Input", CodeInvalidType, "case-sensitive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, e := DecodeEmbeddingRequest(strings.NewReader(c.body), 0)
			if e == nil {
				t.Fatalf("accepted: %+v", req)
			}
			checkAPIError(t, e, c.status, ErrTypeInvalidRequest, c.param, c.code, c.msg)
		})
	}
	// A body over the limit is a 413, whatever it holds.
	_, e := DecodeEmbeddingRequest(strings.NewReader(`{"input":"`+strings.Repeat("a", 100)+`"}`), 50)
	checkAPIError(t, e, http.StatusRequestEntityTooLarge, ErrTypeInvalidRequest, "", CodeRequestTooLarge, "larger than 50 bytes")
}

// checkAPIError checks an error's status, type, param (empty: none), code
// (empty: none), and that its message holds msg; its body is OpenAI's.
func checkAPIError(t *testing.T, e *Error, status int, typ, param, code, msg string) {
	t.Helper()
	if e == nil {
		t.Fatal("no error")
	}
	gotParam, gotCode := deref(e.Param), deref(e.Code)
	if e.Status != status || e.Type != typ || gotParam != param || gotCode != code || !strings.Contains(e.Message, msg) {
		t.Fatalf("got %d %s param %q code %q %q,\nwant %d %s param %q code %q, a message with %q",
			e.Status, e.Type, gotParam, gotCode, e.Message, status, typ, param, code, msg)
	}
	if err := mlcschema.CheckErrorBody(e.Body()); err != nil {
		t.Fatal(err)
	}
}

// Each shape of input decodes to its items and writes back as it came.
func TestEmbeddingInputShapes(t *testing.T) {
	for _, c := range []struct {
		input string
		list  bool
		items []Prompt
	}{
		{`"hello"`, false, []Prompt{{Text: "hello", IsText: true}}},
		{`""`, false, []Prompt{{IsText: true}}},
		{`["a","","b\n"]`, true, []Prompt{{Text: "a", IsText: true}, {IsText: true}, {Text: "b\n", IsText: true}}},
		{`[5,0,7]`, false, []Prompt{{IDs: []int{5, 0, 7}}}},
		{`[[5],[],[1,2]]`, true, []Prompt{{IDs: []int{5}}, {IDs: []int{}}, {IDs: []int{1, 2}}}},
	} {
		body := `{"input":` + c.input + `,"model":"m","encoding_format":"base64","dimensions":8,"user":"u","extra_field":[1]}`
		req, e := DecodeEmbeddingRequest(strings.NewReader(body), 0)
		if e != nil {
			t.Fatalf("%s: %v", c.input, e)
		}
		in := req.Input
		if in.List != c.list || in.Len() != len(c.items) {
			t.Fatalf("%s: list %v, %d items", c.input, in.List, in.Len())
		}
		for i, p := range in.Items {
			w := c.items[i]
			if p.IsText != w.IsText || p.Text != w.Text || len(p.IDs) != len(w.IDs) || !p.IsText && p.IDs == nil {
				t.Fatalf("%s: item %d = %+v, want %+v", c.input, i, p, w)
			}
			for j := range p.IDs {
				if p.IDs[j] != w.IDs[j] {
					t.Fatalf("%s: item %d = %+v, want %+v", c.input, i, p, w)
				}
			}
		}
		if req.Model != "m" || !req.Base64() || *req.Dimensions != 8 || *req.User != "u" {
			t.Fatalf("%s: %+v", c.input, req)
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"input":` + c.input + `,"model":"m","encoding_format":"base64","dimensions":8,"user":"u","extra_field":[1]}`; string(out) != want {
			t.Fatalf("re-encoded\n%s\nwant\n%s", out, want)
		}
		if err := mlcschema.CheckEmbeddingRequest(out); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEmbeddingParamsAndBounds(t *testing.T) {
	single := EmbeddingInput{Items: []Prompt{{Text: "a", IsText: true}}}
	list := EmbeddingInput{Items: []Prompt{{Text: "a", IsText: true}, {Text: "b", IsText: true}}, List: true}
	if single.Param(0) != "input" || list.Param(1) != "input[1]" {
		t.Fatalf("params %q %q", single.Param(0), list.Param(1))
	}
	for _, c := range []struct {
		in          EmbeddingInput
		i, n, limit int
		param       string
	}{
		{single, 0, 9, 8, "input"},
		{list, 1, 100, 99, "input[1]"},
	} {
		checkAPIError(t, c.in.CheckTokens(c.i, c.n, c.limit), 400, ErrTypeInvalidRequest, c.param, CodeContextLengthExceeded, "maximum context length is")
	}
	for _, ok := range [][2]int{{8, 8}, {1, 0}, {100000, -1}} {
		if e := list.CheckTokens(0, ok[0], ok[1]); e != nil {
			t.Errorf("%d tokens, limit %d: %v", ok[0], ok[1], e)
		}
	}
	r := &EmbeddingRequest{Dimensions: new(65)}
	checkAPIError(t, r.CheckDimensions(64), 400, ErrTypeInvalidRequest, "dimensions", CodeIntegerAboveMax, "at most 64")
	for _, dim := range []int{65, 0} {
		if e := r.CheckDimensions(dim); e != nil {
			t.Errorf("dimensions 65 of %d: %v", dim, e)
		}
	}
	if e := (&EmbeddingRequest{}).CheckDimensions(64); e != nil {
		t.Error(e)
	}
}

// The vectors of an answer read back bit for bit, from floats and from
// base64, and the base64 is what Python's struct.pack("<Nf") and
// base64.b64encode write (MLC's server), the floats what its json module
// writes, as numbers.
func TestEmbeddingVectorEncoding(t *testing.T) {
	bits := []uint32{0x3f800000, 0x3dcccccd, 0xbf000000, 0x00000001, 0x7f7fffff, 0x80000000, 0x33d6bf95, 0x3eaaaaab}
	// Computed by Python 3.11 from the bits above.
	const pyBase64 = "AACAP83MzD0AAAC/AQAAAP//f38AAACAlb/WM6uqqj4="
	pyFloats := []float64{1.0, 0.10000000149011612, -0.5, 1.401298464324817e-45, 3.4028234663852886e+38, math.Copysign(0, -1), 1.0000000116860974e-07, 0.3333333432674408}
	v := make([]float32, len(bits))
	for i, b := range bits {
		v[i] = math.Float32frombits(b)
	}
	if got := EncodeEmbeddingBase64(v); got != pyBase64 {
		t.Fatalf("base64 %s, Python's %s", got, pyBase64)
	}
	for _, base64 := range []bool{false, true} {
		resp := NewEmbeddingResponse(&EmbeddingRequest{EncodingFormat: map[bool]string{false: "", true: EncodingBase64}[base64]}, "m", [][]float32{v, v[:2]}, 7)
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if err := mlcschema.CheckEmbeddingResponse(b); err != nil {
			t.Fatal(err)
		}
		var back EmbeddingResponse
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Object != "list" || back.Model != "m" || back.Usage != (EmbeddingUsage{7, 7}) || len(back.Data) != 2 {
			t.Fatalf("%s", b)
		}
		for i, d := range back.Data {
			if d.Object != ObjectEmbedding || d.Index != i || d.Embedding.Base64 != base64 {
				t.Fatalf("data[%d] = %+v", i, d)
			}
			want := v[:len(resp.Data[i].Embedding.Floats)]
			if !sameBits(d.Embedding.Floats, want) {
				t.Fatalf("base64 %v: data[%d] read back as %v, want %v", base64, i, d.Embedding.Floats, want)
			}
		}
		// As a float64 reader sees them: Python's numbers, exactly.
		var raw struct {
			Data []struct {
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if base64 {
			var s string
			if err := json.Unmarshal(raw.Data[0].Embedding, &s); err != nil || s != pyBase64 {
				t.Fatalf("base64 %q, Python's %s (%v)", s, pyBase64, err)
			}
			continue
		}
		var fs []float64
		if err := json.Unmarshal(raw.Data[0].Embedding, &fs); err != nil {
			t.Fatal(err)
		}
		for i := range fs {
			if math.Float64bits(fs[i]) != math.Float64bits(pyFloats[i]) {
				t.Fatalf("value %d reads as %v, Python wrote %v", i, fs[i], pyFloats[i])
			}
		}
	}
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestEmbeddingVectorErrors(t *testing.T) {
	if _, err := json.Marshal(EmbeddingVector{Floats: []float32{1, float32(math.NaN())}}); err == nil {
		t.Error("NaN encoded")
	}
	for _, s := range []string{`"AAA"`, `"AAAAAAAA"`, `"!!!!"`, `{}`, `["x"]`} {
		var v EmbeddingVector
		if err := json.Unmarshal([]byte(s), &v); err == nil {
			t.Errorf("%s read as %+v", s, v)
		}
	}
}

func TestTruncateEmbedding(t *testing.T) {
	v := []float32{3, 4, 12, 0.5}
	orig := append([]float32(nil), v...)
	for d := 1; d <= 6; d++ {
		got := TruncateEmbedding(v, d)
		if len(got) != min(d, len(v)) {
			t.Fatalf("d=%d: %d values", d, len(got))
		}
		var sq, dot, norm float64
		for i, x := range got {
			sq += float64(x) * float64(x)
			dot += float64(x) * float64(v[i])
			norm += float64(v[i]) * float64(v[i])
		}
		if math.Abs(sq-1) > 1e-6 {
			t.Errorf("d=%d: squared length %v", d, sq)
		}
		// Same direction as the prefix.
		if math.Abs(dot-math.Sqrt(norm)) > 1e-5*math.Sqrt(norm) {
			t.Errorf("d=%d: %v is not along %v", d, got, v[:len(got)])
		}
	}
	if !sameBits(v, orig) {
		t.Fatalf("input modified: %v", v)
	}
	// 3-4-5: float32 division by an exact norm is exact.
	if got := TruncateEmbedding(v, 2); !sameBits(got, []float32{0.6, 0.8}) {
		t.Errorf("3, 4 -> %v", got)
	}
	// A vector too small to normalise stays as it is, as MLC leaves it.
	tiny := []float32{1e-13, 0, 1e-30}
	if got := TruncateEmbedding(tiny, 3); !sameBits(got, tiny) {
		t.Errorf("tiny vector -> %v", got)
	}
	if got := TruncateEmbedding([]float32{0, 0}, 1); !sameBits(got, []float32{0}) {
		t.Errorf("zero vector -> %v", got)
	}
	// dimensions applies in NewEmbeddingResponse, without touching its
	// argument.
	resp := NewEmbeddingResponse(&EmbeddingRequest{Dimensions: new(2)}, "m", [][]float32{v}, 1)
	if !sameBits(resp.Data[0].Embedding.Floats, []float32{0.6, 0.8}) || !sameBits(v, orig) {
		t.Errorf("dimensions 2: %v (input %v)", resp.Data[0].Embedding.Floats, v)
	}
}

func TestEncodeEmbeddingRequest(t *testing.T) {
	// A request built in Go writes what MLC's model accepts.
	for _, in := range []EmbeddingInput{
		{Items: []Prompt{{Text: "a", IsText: true}}},
		{Items: []Prompt{{IDs: []int{1}}, {}}, List: true},
	} {
		b, err := json.Marshal(EmbeddingRequest{Input: in})
		if err != nil {
			t.Fatal(err)
		}
		if err := mlcschema.CheckEmbeddingRequest(b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if _, e := DecodeEmbeddingRequest(bytes.NewReader(b), 0); e != nil {
			t.Fatalf("%s: %v", b, e)
		}
	}
}
