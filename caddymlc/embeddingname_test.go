package caddymlc

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// openAIEmbeddings is a client of the official openai SDK: the models
// listed, the embedding model's card, its vectors asked as floats and in
// the SDK's default form (base64 on the wire, decoded by the SDK), and the
// error of an unknown name.
const openAIEmbeddings = `
const OpenAI = require("openai");
(async () => {
  const client = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "unused", maxRetries: 0 });
  const model = process.env.EMBED, input = ["the cat sat on the mat", "by the river"];
  const models = (await client.models.list()).data.map((m) => m.id);
  const card = await client.models.retrieve(model);
  const floats = await client.embeddings.create({ model, input, encoding_format: "float" });
  const sdk = await client.embeddings.create({ model, input });
  let unknown = null;
  try { await client.embeddings.create({ model: "text-embedding-3-small", input }); }
  catch (e) { unknown = { status: e.status, code: e.code, param: e.param, message: e.message }; }
  console.log(JSON.stringify({ models, card: card.id, model: floats.model, usage: floats.usage,
    floats: floats.data.map((d) => d.embedding), sdk: sdk.data.map((d) => d.embedding), unknown }));
})().catch((e) => { console.error(e); process.exit(1); });
`

// The embedding model by its own name, through the official openai SDK,
// on a single disaggregated model (the request reaches the router with
// its body unread) and under a name the config gives it: listed in
// /v1/models beside the chat model, its vectors bit for bit an engine's
// own, an unknown name a 404 that names it.
func TestEmbeddingModelByName(t *testing.T) {
	for _, c := range []struct{ opts, name string }{
		{"\t\t\tembedding_model tiny-embed\n", "tiny-embed"},
		{"\t\t\tembedding_model tiny-embed name search\n", "search"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startSite(t, 2, c.opts)
			var got struct {
				Models  []string
				Card    string
				Model   string
				Usage   protocol.EmbeddingUsage
				Floats  [][]float64
				SDK     [][]float64
				Unknown struct {
					Status               int
					Code, Param, Message string
				}
			}
			out := npmref.NodeScript(t, openAIEmbeddings, "BASE="+s.base, "EMBED="+c.name)
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !slices.Equal(got.Models, []string{"tiny", c.name}) || got.Card != c.name || got.Model != c.name {
				t.Fatalf("models %v, card %q, answer's model %q", got.Models, got.Card, got.Model)
			}
			var want protocol.EmbeddingResponse
			mustUnmarshal(t, post(t, s.engines[1]+protocol.PathEmbeddings,
				map[string]any{"input": []string{"the cat sat on the mat", "by the river"}, "encoding_format": "float"}, 200), &want)
			if got.Usage != want.Usage {
				t.Errorf("usage %+v, engine %+v", got.Usage, want.Usage)
			}
			for what, vectors := range map[string][][]float64{"float": got.Floats, "sdk default": got.SDK} {
				if len(vectors) != len(want.Data) {
					t.Fatalf("%s: %d vectors, engine %d", what, len(vectors), len(want.Data))
				}
				for i, v := range vectors {
					w := want.Data[i].Embedding.Floats
					if len(v) != len(w) || len(v) == 0 {
						t.Fatalf("%s %d: %d values, engine %d", what, i, len(v), len(w))
					}
					for j := range v {
						if math.Float32bits(float32(v[j])) != math.Float32bits(w[j]) {
							t.Fatalf("%s %d[%d]: %v, engine %v", what, i, j, v[j], w[j])
						}
					}
				}
			}
			u := got.Unknown
			if u.Status != http.StatusNotFound || u.Code != protocol.CodeModelNotFound || u.Param != "model" ||
				!strings.Contains(u.Message, `"tiny", "`+c.name+`"`) {
				t.Errorf("unknown model: %+v", u)
			}
		})
	}
}
