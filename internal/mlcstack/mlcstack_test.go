package mlcstack

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

func post(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestSmoke(t *testing.T) {
	st := Setup(t)
	s := st.Start(t, Options{Servers: 1})[0]
	code, out := post(t, s.URL+"/v1/completions", map[string]any{"prompt": "the cat sat on", "max_tokens": 8, "temperature": 0})
	t.Logf("%d %s", code, out)
	code, out = post(t, s.Backend+"/v1/completions", map[string]any{"prompt": "the cat sat on", "max_tokens": 8, "temperature": 0})
	t.Logf("%d %s", code, out)
}
