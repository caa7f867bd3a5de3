package builtin

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// embedResp is an embeddings answer read back: its vectors as float32.
type embedResp struct {
	raw     []byte
	model   string
	vectors [][]float32
	base64  []bool
	usage   protocol.EmbeddingUsage
}

// embed posts an embeddings request that must succeed and reads the
// answer, checked against MLC's model.
func embed(t testing.TB, c *http.Client, url string, req map[string]any) embedResp {
	t.Helper()
	status, body := post(t, c, url+protocol.PathEmbeddings, req)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if err := mlcschema.CheckEmbeddingResponse(body); err != nil {
		t.Fatal(err)
	}
	var resp protocol.EmbeddingResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	out := embedResp{raw: body, model: resp.Model, usage: resp.Usage}
	for i, d := range resp.Data {
		if d.Index != i || d.Object != protocol.ObjectEmbedding {
			t.Fatalf("data[%d]: index %d object %q", i, d.Index, d.Object)
		}
		out.vectors = append(out.vectors, d.Embedding.Floats)
		out.base64 = append(out.base64, d.Embedding.Base64)
	}
	return out
}

// embedError posts an embeddings request that must fail and returns the
// error it answered.
func embedError(t testing.TB, c *http.Client, url string, req any) *protocol.Error {
	t.Helper()
	status, body := post(t, c, url+protocol.PathEmbeddings, req)
	e := protocol.ParseError(status, body)
	if e == nil {
		t.Fatalf("status %d, not an error: %s", status, body)
	}
	if err := mlcschema.CheckErrorBody(body); err != nil {
		t.Fatal(err)
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func cosine(a, b []float32) float64 {
	var d float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
	}
	return d / norm(a) / norm(b)
}

func TestEmbeddings(t *testing.T) {
	te := newTestEngine(t, "", false, "--embedding-model", TinyEmbedModel, "--embedding-model-lib", "/nonexistent/embed.so")
	tok := tiny.New()
	texts := []string{"the cat sat on the mat", "the cat sat on a mat", "numbers 12 and 7!", "", "zebra\u00e9"}

	whole := embed(t, te.client, te.url, map[string]any{"input": texts})
	if whole.model != TinyEmbedModel || len(whole.vectors) != len(texts) {
		t.Fatalf("model %q, %d vectors", whole.model, len(whole.vectors))
	}
	tokens := 0
	for i, v := range whole.vectors {
		if len(v) != EmbeddingDim || math.Abs(norm(v)-1) > 1e-6 || whole.base64[i] {
			t.Fatalf("vector %d: %d values, length %v, base64 %v", i, len(v), norm(v), whole.base64[i])
		}
		tokens += len(tok.Encode(texts[i])) + 1 // and EOS
	}
	if whole.usage != (protocol.EmbeddingUsage{PromptTokens: tokens, TotalTokens: tokens}) {
		t.Errorf("usage %+v, want %d tokens", whole.usage, tokens)
	}
	// Texts that share most words are closer than texts that share none.
	if near, far := cosine(whole.vectors[0], whole.vectors[1]), cosine(whole.vectors[0], whole.vectors[2]); near <= far+0.2 {
		t.Errorf("cosine of near texts %v, of far ones %v", near, far)
	}

	t.Run("one input at a time", func(t *testing.T) {
		for i, text := range texts {
			one := embed(t, te.client, te.url, map[string]any{"input": text, "model": "anything"})
			if !sameBits(one.vectors[0], whole.vectors[i]) || one.model != "anything" || one.usage.PromptTokens != len(tok.Encode(text))+1 {
				t.Fatalf("%q alone: model %q usage %+v, differs from its place in a list", text, one.model, one.usage)
			}
		}
	})
	t.Run("token ids", func(t *testing.T) {
		var lists [][]int
		for _, text := range texts {
			lists = append(lists, tok.Encode(text))
		}
		ids := embed(t, te.client, te.url, map[string]any{"input": lists})
		for i := range texts {
			if !sameBits(ids.vectors[i], whole.vectors[i]) {
				t.Fatalf("ids of %q embed differently from the text", texts[i])
			}
		}
		if ids.usage != whole.usage {
			t.Errorf("usage %+v, text's %+v", ids.usage, whole.usage)
		}
		one := embed(t, te.client, te.url, map[string]any{"input": lists[0]})
		if len(one.vectors) != 1 || !sameBits(one.vectors[0], whole.vectors[0]) {
			t.Fatal("one list of ids embeds differently from its text")
		}
		// Ids that spell the text another way (bytes, not the word
		// token) embed as the text, as MLC decodes them first; so do ids
		// with EOS already at the end.
		spelled := []int{}
		for _, b := range []byte(" cat") {
			spelled = append(spelled, tok.Encode(string([]byte{b}))...)
		}
		cat := embed(t, te.client, te.url, map[string]any{"input": " cat"})
		for _, ids := range [][]int{spelled, append(tok.Encode(" cat"), tiny.EOS)} {
			r := embed(t, te.client, te.url, map[string]any{"input": [][]int{ids}})
			if !sameBits(r.vectors[0], cat.vectors[0]) || r.usage != cat.usage || cat.usage.PromptTokens != 2 {
				t.Fatalf("\" cat\" as %v embeds differently (usage %+v, the text's %+v)", ids, r.usage, cat.usage)
			}
		}
	})
	t.Run("base64", func(t *testing.T) {
		b := embed(t, te.client, te.url, map[string]any{"input": texts, "encoding_format": "base64"})
		for i := range texts {
			if !b.base64[i] || !sameBits(b.vectors[i], whole.vectors[i]) {
				t.Fatalf("vector %d: base64 %v, differs from the floats", i, b.base64[i])
			}
		}
	})
	t.Run("dimensions", func(t *testing.T) {
		for _, d := range []int{1, 7, 16, EmbeddingDim} {
			for _, format := range []string{"float", "base64"} {
				short := embed(t, te.client, te.url, map[string]any{"input": texts, "dimensions": d, "encoding_format": format})
				for i, v := range short.vectors {
					if len(v) != d || math.Abs(norm(v)-1) > 1e-6 {
						t.Fatalf("dimensions %d: %d values, length %v", d, len(v), norm(v))
					}
					if want := protocol.TruncateEmbedding(whole.vectors[i], d); !sameBits(v, want) {
						t.Fatalf("dimensions %d: %v, want %v", d, v, want)
					}
					// Along the full vector's prefix.
					if c := cosine(v, whole.vectors[i][:d]); math.Abs(c-1) > 1e-6 {
						t.Fatalf("dimensions %d: cosine with the prefix %v", d, c)
					}
				}
			}
		}
	})
	t.Run("models", func(t *testing.T) {
		resp, err := te.client.Get(te.url + protocol.PathModels)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		resp.Body.Close()
		if err := mlcschema.CheckModelList([]byte(body)); err != nil {
			t.Fatal(err)
		}
		var l protocol.ModelList
		if err := json.Unmarshal([]byte(body), &l); err != nil || len(l.Data) != 2 || l.Data[0].ID != TinyModel || l.Data[1].ID != TinyEmbedModel {
			t.Fatalf("%s (%v)", body, err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		long := strings.Repeat(" the", defaultEmbeddingTokens) // and EOS: one too many
		for _, c := range []struct {
			name        string
			req         any
			param, code string
		}{
			{"dimensions too large", map[string]any{"input": "a", "dimensions": EmbeddingDim + 1}, "dimensions", protocol.CodeIntegerAboveMax},
			{"dimensions zero", map[string]any{"input": "a", "dimensions": 0}, "dimensions", protocol.CodeIntegerBelowMin},
			{"id outside the vocabulary", map[string]any{"input": [][]int{{5}, {3, tok.VocabSize()}}}, "input[1][1]", protocol.CodeInvalidValue},
			{"one id list outside the vocabulary", map[string]any{"input": []int{tok.VocabSize() + 7}}, "input[0]", protocol.CodeInvalidValue},
			{"negative id", map[string]any{"input": []int{-1}}, "input[0]", protocol.CodeIntegerBelowMin},
			{"input too long", map[string]any{"input": long}, "input", protocol.CodeContextLengthExceeded},
			{"an input of a list too long", map[string]any{"input": []string{"a", long}}, "input[1]", protocol.CodeContextLengthExceeded},
			{"empty list", map[string]any{"input": []string{}}, "input", protocol.CodeEmptyArray},
			{"no input", map[string]any{"model": TinyEmbedModel}, "input", protocol.CodeMissingParameter},
			{"encoding_format", map[string]any{"input": "a", "encoding_format": "hex"}, "encoding_format", protocol.CodeInvalidValue},
		} {
			e := embedError(t, te.client, te.url, c.req)
			if e.Status != http.StatusBadRequest || e.Type != protocol.ErrTypeInvalidRequest || deref(e.Param) != c.param || deref(e.Code) != c.code {
				t.Errorf("%s: %d %s param %q code %q: %s", c.name, e.Status, e.Type, deref(e.Param), deref(e.Code), e.Message)
			}
		}
		// The longest input embeds.
		fits := strings.Repeat(" the", defaultEmbeddingTokens-1)
		if r := embed(t, te.client, te.url, map[string]any{"input": fits}); r.usage.PromptTokens != defaultEmbeddingTokens {
			t.Errorf("usage %+v", r.usage)
		}
		resp, err := te.client.Get(te.url + protocol.PathEmbeddings)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET: %d", resp.StatusCode)
		}
	})
}

// An engine without an embedding model answers MLC's 400, and lists only
// its model.
func TestEmbeddingsNotServed(t *testing.T) {
	te := newTestEngine(t, "", false)
	for _, model := range []string{"", TinyEmbedModel} {
		req := map[string]any{"input": "hi"}
		if model != "" {
			req["model"] = model
		}
		e := embedError(t, te.client, te.url, req)
		want := model
		if want == "" {
			want = "None"
		}
		if e.Status != http.StatusBadRequest || deref(e.Param) != "model" || deref(e.Code) != protocol.CodeModelNotFound ||
			!strings.Contains(e.Message, `The requested model "`+want+`" is not served as an embedding model.`) {
			t.Errorf("model %q: %d param %q code %q: %s", model, e.Status, deref(e.Param), deref(e.Code), e.Message)
		}
	}
	resp, err := te.client.Get(te.url + protocol.PathModels)
	if err != nil {
		t.Fatal(err)
	}
	var l protocol.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Data) != 1 || l.Data[0].ID != TinyModel {
		t.Fatalf("%+v (%v)", l, err)
	}
	resp.Body.Close()
}

// A directory model tokenizes with its tokenizer.json, appends its EOS
// (tokenizer_config.json's), draws its vectors from its name, and takes
// its input bound from mlc-chat-config.json.
func TestDirectoryEmbeddingModel(t *testing.T) {
	src := filepath.Join("testdata", "spm-mini", "tokenizer.json")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mini-embed")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"mlc-chat-config.json":  `{"context_window_size": 8}`,
		"tokenizer_config.json": `{"eos_token": "</s>"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	info, err := EmbeddingModelInfo([]string{TinyModel, "--embedding-model", dir})
	if err != nil || info == nil || info.ID != dir || info.Dim != EmbeddingDim || info.MaxTokens != 8 {
		t.Fatalf("info %+v (%v)", info, err)
	}
	te := newTestEngine(t, "", false, "--embedding-model", dir)
	m := te.e.emb
	text := "hello world"
	ids := m.tok.Encode(text)
	r := embed(t, te.client, te.url, map[string]any{"input": text})
	byIDs := embed(t, te.client, te.url, map[string]any{"input": ids})
	if r.model != dir || !sameBits(r.vectors[0], byIDs.vectors[0]) || r.usage.PromptTokens != len(m.tokensOf(t, text)) || byIDs.usage != r.usage {
		t.Fatalf("model %q usage %+v (ids' %+v); ids and text alike: %v", r.model, r.usage, byIDs.usage, sameBits(r.vectors[0], byIDs.vectors[0]))
	}
	if m.eos < 0 || !slices.Equal(m.tokensOf(t, text), append(ids, m.eos)) {
		t.Fatalf("EOS %d, tokens %v of %v", m.eos, m.tokensOf(t, text), ids)
	}
	// Another name draws other vectors for the same tokens.
	tinyEmbed, err := loadEmbedder(TinyEmbedModel)
	if err != nil {
		t.Fatal(err)
	}
	other := *m
	other.seed = tinyEmbed.seed
	if sameBits(other.embed(m.tokensOf(t, text)), r.vectors[0]) {
		t.Error("two models, one vector")
	}
	long := text
	for len(m.tok.Encode(long))+1 <= 8 { // and EOS
		long += " " + text
	}
	e := embedError(t, te.client, te.url, map[string]any{"input": long})
	if deref(e.Code) != protocol.CodeContextLengthExceeded || !strings.Contains(e.Message, "maximum context length is 8 tokens") {
		t.Errorf("%s %s", deref(e.Code), e.Message)
	}
}

// tokensOf is the ids the model embeds for text.
func (m *embedder) tokensOf(t *testing.T, text string) []int {
	t.Helper()
	in := protocol.EmbeddingInput{Items: []protocol.Prompt{{Text: text, IsText: true}}}
	ids, e := m.tokens(in, 0)
	if e != nil {
		t.Fatal(e)
	}
	return ids
}

func TestEmbeddingModelFlags(t *testing.T) {
	o, err := ParseArgs(strings.Fields("tiny --embedding-model tiny-embed --embedding-model-lib /x/embed.so"), io.Discard)
	if err != nil || o.EmbeddingModel != TinyEmbedModel || o.EmbeddingModelLib != "/x/embed.so" {
		t.Fatalf("%+v (%v)", o, err)
	}
	if info, err := EmbeddingModelInfo([]string{"tiny"}); info != nil || err != nil {
		t.Errorf("no embedding model: %+v (%v)", info, err)
	}
	info, err := EmbeddingModelInfo([]string{"tiny", "--embedding-model", TinyEmbedModel})
	if err != nil || *info != (EmbeddingInfo{ID: TinyEmbedModel, Dim: EmbeddingDim, MaxTokens: defaultEmbeddingTokens}) {
		t.Errorf("%+v (%v)", info, err)
	}
	// A model that does not load stops the engine from starting.
	o, err = ParseArgs(strings.Fields("tiny --embedding-model /no/such/model"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(o, false, io.Discard); err == nil || !strings.Contains(err.Error(), "/no/such/model") {
		t.Errorf("NewEngine: %v", err)
	}
}

// Every engine process, and the same one restarted, gives the same
// vectors, bit for bit, as the in-process engine.
func TestEmbeddingsAcrossProcesses(t *testing.T) {
	req := map[string]any{"input": []string{"the cat sat", "", "a longer text, with symbols: 42!"}, "encoding_format": "base64"}
	te := newTestEngine(t, "", false, "--embedding-model", TinyEmbedModel)
	want := embed(t, te.client, te.url, req)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	port := freePort(t)
	for round := range 2 {
		p := startProc(t, port, nil, "--embedding-model", TinyEmbedModel)
		got := embed(t, c, p.url(""), req)
		if string(got.raw) != string(want.raw) {
			t.Fatalf("process %d answered\n%s\nthe in-process engine\n%s", round, got.raw, want.raw)
		}
		c.CloseIdleConnections()
		p.stop(t)
	}
}
