package caddymlc

import (
	"fmt"
	"strings"
	"testing"
)

// With no engine ready (external engines that are down), a request waits
// in the queue, then gets a 503 with an OpenAI error body: a short wait,
// not a hang.
func TestNoReadyEngineIs503(t *testing.T) {
	ports := freePorts(t, 3)
	loadCaddyfile(t, fmt.Sprintf(`{
	admin off
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
		endpoint 127.0.0.1:%d external
		endpoint 127.0.0.1:%d external
		queue_timeout 300ms
	}
}
`, ports[0], ports[1], ports[2]))
	for _, stream := range []bool{false, true} {
		raw := post(t, fmt.Sprintf("http://127.0.0.1:%d/v1/completions", ports[0]), map[string]any{"prompt": "hello", "stream": stream}, 503)
		if !strings.Contains(string(raw), `"engine_unavailable"`) || !strings.Contains(string(raw), `"error"`) {
			t.Fatalf("body %s", raw)
		}
	}
	for i, n := range liveInflight() {
		if n != 0 {
			t.Fatalf("in-flight count of engine %d is %d", i, n)
		}
	}
}
