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

func TestMicroSmoke(t *testing.T) {
	st := Setup(t)
	ss := st.Start(t, Options{Servers: 2, Disaggregation: true})
	prompt := "the cat sat on the mat and then it went to the big red house near the"
	code, out := post(t, ss[1].URL+"/microserving/prep_recv", map[string]any{"prompt": prompt, "end": -1, "user": "u1", "max_tokens": 12, "temperature": 0, "debug_config": map[string]any{}})
	t.Logf("prep_recv %d %s", code, out)
	var pr struct {
		KV      string `json:"kv_append_metadata"`
		Matched int    `json:"prefix_matched_length"`
	}
	json.Unmarshal(out, &pr)
	code, out = post(t, ss[0].URL+"/microserving/remote_send", map[string]any{"prompt": prompt, "begin": pr.Matched, "end": 21, "kv_addr_info": pr.KV, "recv_rank": 1, "user": "u1", "max_tokens": 12, "temperature": 0, "debug_config": map[string]any{}})
	t.Logf("remote_send %d %s", code, out)
	code, out = post(t, ss[1].URL+"/microserving/start_generate", map[string]any{"prompt": prompt, "begin": 21, "user": "u1", "max_tokens": 1, "temperature": 0, "debug_config": map[string]any{}})
	t.Logf("start_generate %d %s", code, out)
	code, out = post(t, ss[0].URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 12, "temperature": 0})
	t.Logf("direct %d %s", code, out)
	code, out = post(t, ss[0].URL+"/microserving/prep_recv", map[string]any{"prompt": prompt, "end": -1, "user": "u2", "max_tokens": 12})
	t.Logf("no debug_config %d %s", code, out)
	for _, s := range ss {
		ex, err := s.Exchanges()
		t.Log(ex, err)
		l, err := s.BackendLoad()
		t.Log(l, err)
	}
}
