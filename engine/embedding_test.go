package engine

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A fleet's embedding model reaches the built-in engines it starts, which
// serve it.
func TestFleetBuiltinEmbeddingModel(t *testing.T) {
	h := newHarness(t)
	t.Setenv(envRealBuiltin, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Model: builtin.TinyModel, EmbeddingModel: builtin.TinyEmbedModel, EmbeddingModelLib: "embed.so",
		Kind: KindBuiltin, Program: exe, Endpoints: localEndpoints(t, 1),
		HealthInterval: 100 * time.Millisecond, StartupTimeout: waitTimeout}
	f := h.newFleet(spec, Options{})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	c := &http.Client{Timeout: waitTimeout}
	defer c.CloseIdleConnections()
	resp, err := c.Post("http://"+spec.Endpoints[0].Addr()+protocol.PathEmbeddings, "application/json",
		bytes.NewReader([]byte(`{"input":["hello","world"],"dimensions":8}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out protocol.EmbeddingResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if out.Model != builtin.TinyEmbedModel || len(out.Data) != 2 || len(out.Data[1].Embedding.Floats) != 8 {
		t.Fatalf("%+v", out)
	}
}
