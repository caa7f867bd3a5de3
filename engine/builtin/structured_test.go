package builtin

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// structuredSchemas are schemas of the kinds clients send, each with the
// format a router forwards.
var structuredSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["name","age"],"additionalProperties":false}`,
	`{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"ok":{"type":"boolean"},"n":{"type":["number","null"]}},"required":["color","ok","n"],"additionalProperties":false}`,
	`{"$defs":{"item":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]{2,5}[0-9]?$"},"qty":{"type":"integer"}},"required":["id","qty"],"additionalProperties":false}},"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"},"minItems":1,"maxItems":2}},"required":["items"],"additionalProperties":false}`,
	`{"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"number"}},"required":["kind","x"],"additionalProperties":false},{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}]}`,
}

// checkValid validates text against schema ("" for any JSON object) with
// a real validator.
func checkValid(t testing.TB, schema, text string) {
	t.Helper()
	doc := schematest.Check(t, "answer", text, schema)
	if _, ok := doc.(map[string]any); schema == "" && !ok {
		t.Fatalf("answer %q is not a JSON object", text)
	}
}

func formatOf(schema string) map[string]any {
	if schema == "" {
		return map[string]any{"type": "json_object"}
	}
	return map[string]any{"type": "json_object", "schema": schema}
}

// TestStructuredOutputTiny: with a response format, the tiny model's
// answers (greedy, streamed, sampled) are JSON that validates, and end
// with EOS.
func TestStructuredOutputTiny(t *testing.T) {
	te := newTestEngine(t, "", false)
	for i, schema := range append([]string{""}, structuredSchemas...) {
		for j, p := range prompts(3) {
			req := with(greedy(clip(p, 20), 400), "response_format", formatOf(schema))
			whole := complete(t, te.client, te.url, protocol.PathCompletions, req)
			if whole.finish[0] != protocol.FinishStop {
				t.Fatalf("schema %d prompt %d: finish %s, text %q", i, j, whole.finish[0], whole.texts[0])
			}
			checkValid(t, schema, whole.texts[0])
			streamed := complete(t, te.client, te.url, protocol.PathCompletions, with(req, "stream", true))
			if streamed.texts[0] != whole.texts[0] {
				t.Fatalf("schema %d prompt %d: streamed %q, whole %q", i, j, streamed.texts[0], whole.texts[0])
			}
			sampled := complete(t, te.client, te.url, protocol.PathCompletions, with(req, "temperature", 0.9, "n", 2, "seed", j))
			for k, text := range sampled.texts {
				if sampled.finish[k] == protocol.FinishStop {
					checkValid(t, schema, text)
				}
			}
		}
	}
	if st := te.e.grammars.stats(); st.Grammars != len(structuredSchemas)+1 || st.MasksCompute == 0 || st.MaskBytes == 0 || st.States == 0 {
		t.Errorf("grammar cache after %d formats: %+v", len(structuredSchemas)+1, st)
	}
}

// TestStructuredOutputResumed: an answer resumed from any token, the
// prompt ending with the tokens delivered and resumed_tokens saying how
// many, continues exactly, in one engine or another.
func TestStructuredOutputResumed(t *testing.T) {
	te := newTestEngine(t, "", false)
	other := newTestEngine(t, "", false)
	tok := tiny.New()
	for i, schema := range structuredSchemas {
		prompt := tok.Encode(clip(prompts(4)[i], 20))
		req := with(greedy(prompt, 400), "response_format", formatOf(schema))
		whole := complete(t, te.client, te.url, protocol.PathCompletions, req).texts[0]
		ids := tok.Encode(whole)
		if tok.Decode(ids) != whole {
			t.Fatalf("schema %d: %q does not encode back", i, whole)
		}
		for k := 1; k < len(ids); k += 1 + len(ids)/5 {
			f := formatOf(schema)
			f["resumed_tokens"] = k
			resumed := append(append([]int(nil), prompt...), ids[:k]...)
			rest := complete(t, other.client, other.url, protocol.PathCompletions, with(greedy(resumed, 400-k), "response_format", f))
			if got := tok.Decode(ids[:k]) + rest.texts[0]; got != whole || rest.finish[0] != protocol.FinishStop {
				t.Fatalf("schema %d resumed after %d tokens: %q (%s), want %q", i, k, got, rest.finish[0], whole)
			}
		}
	}
}

// TestStructuredOutputPreempted: under KV pressure that preempts them,
// constrained answers are those of a roomy engine.
func TestStructuredOutputPreempted(t *testing.T) {
	small := newTestEngine(t, "max_total_seq_length=384;prefill_chunk_size=64", false, "--prefix-cache-mode", "disable")
	roomy := newTestEngine(t, "", false, "--prefix-cache-mode", "disable")
	ps := prompts(12)
	req := func(i int) map[string]any {
		return with(greedy(clip(ps[i], 40), 60), "response_format", formatOf(structuredSchemas[i%len(structuredSchemas)]))
	}
	want := make([]string, len(ps))
	for i := range ps {
		want[i] = complete(t, roomy.client, roomy.url, protocol.PathCompletions, req(i)).texts[0]
	}
	var wg sync.WaitGroup
	got := make([]result, len(ps))
	for i := range ps {
		wg.Go(func() {
			got[i] = complete(goTB{t}, small.client, small.url, protocol.PathCompletions, with(req(i), "stream", i%2 == 0))
		})
	}
	wg.Wait()
	for i := range ps {
		if got[i].texts[0] != want[i] {
			t.Errorf("request %d: %q, want %q", i, got[i].texts[0], want[i])
		}
	}
	if m := small.waitMetrics(func(Metrics) bool { return true }); m.Preemptions == 0 {
		t.Errorf("no preemption under pressure: %+v", m)
	}
}

// TestStructuredOutputErrors: a schema the engine cannot honour, and a
// resumed text outside it, are 400s naming the parameter.
func TestStructuredOutputErrors(t *testing.T) {
	te := newTestEngine(t, "", false)
	for _, c := range []struct {
		format map[string]any
		param  string
	}{
		{map[string]any{"type": "json_object", "schema": `{"type":"array","contains":{},"maxContains":3}`}, "response_format.schema.maxContains"},
		{map[string]any{"type": "json_object", "schema": `{"type":`}, "response_format.schema"},
		{map[string]any{"type": "json_object", "resumed_tokens": 2}, "response_format.resumed_tokens"},
		{map[string]any{"type": "yaml"}, "response_format.type"},
	} {
		status, body := post(t, te.client, te.url+protocol.PathCompletions, with(greedy("once upon a time", 5), "response_format", c.format))
		var eb protocol.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil || status != http.StatusBadRequest || eb.Error == nil || eb.Error.Param == nil || *eb.Error.Param != c.param {
			t.Errorf("%v: %d %s, want 400 naming %s", c.format, status, body, c.param)
		}
	}
}

// TestStructuredOutputQwen3 serves Qwen3's byte-level BPE vocabulary
// (151k tokens): the answers validate, and the time per output token
// with a schema is compared with the time without one.
func TestStructuredOutputQwen3(t *testing.T) {
	dir := npmref.ModelDir(t, "qwen3")
	te := newTestEngineModel(t, dir, "", false)
	prompt := "Describe a person as JSON."
	plain := with(greedy(prompt, 64), "debug_config", map[string]any{"ignore_eos": true})
	t0 := time.Now()
	base := complete(t, te.client, te.url, protocol.PathCompletions, plain)
	perPlain := time.Since(t0) / time.Duration(max(1, base.usage.CompletionTokens))
	for i, schema := range append([]string{""}, structuredSchemas...) {
		req := with(greedy(prompt, 300), "response_format", formatOf(schema))
		first := time.Now()
		got := complete(t, te.client, te.url, protocol.PathCompletions, req)
		cold := time.Since(first)
		if got.finish[0] != protocol.FinishStop {
			t.Fatalf("schema %d: finish %s, text %q", i, got.finish[0], got.texts[0])
		}
		checkValid(t, schema, got.texts[0])
		warm := time.Now()
		again := complete(t, te.client, te.url, protocol.PathCompletions, req)
		if again.texts[0] != got.texts[0] {
			t.Fatalf("schema %d: %q then %q", i, got.texts[0], again.texts[0])
		}
		per := time.Since(warm) / time.Duration(max(1, again.usage.CompletionTokens))
		t.Logf("schema %d: %d tokens, first %v, then %v per token (plain %v per token): %q", i, again.usage.CompletionTokens, cold, per, perPlain, got.texts[0])
	}
	st := te.e.grammars.stats()
	t.Logf("grammar cache: %+v", st)
}

// TestStructuredOutputDistinct: array items under uniqueItems and object
// keys are distinct in the tiny model's answers, greedy and sampled,
// where the grammar alone cannot keep them so (open-ended items, free
// keys); the answers validate.
func TestStructuredOutputDistinct(t *testing.T) {
	te := newTestEngine(t, "", false)
	for _, schema := range []string{
		`{"type":"array","items":{"type":"string","maxLength":2},"uniqueItems":true,"minItems":4,"maxItems":6}`,
		`{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"uniqueItems":true,"minItems":5}`,
		`{"type":"object","additionalProperties":{"type":"integer"},"minProperties":4}`,
		`{"type":"array","items":{"type":"object","properties":{"a":{"type":"boolean"},"b":{"enum":[1,2]}}},"uniqueItems":true,"minItems":3}`,
	} {
		v := schematest.Compile(t, schema)
		for j, p := range prompts(4) {
			req := with(greedy(clip(p, 20), 400), "response_format", formatOf(schema))
			for k, r := range []map[string]any{req, with(req, "temperature", 0.9, "seed", j)} {
				got := complete(t, te.client, te.url, protocol.PathCompletions, r)
				if got.finish[0] != protocol.FinishStop {
					t.Fatalf("%s, prompt %d, request %d: finish %s, text %q", schema, j, k, got.finish[0], got.texts[0])
				}
				schematest.Validate(t, v, "answer to "+schema, got.texts[0])
			}
		}
	}
}
