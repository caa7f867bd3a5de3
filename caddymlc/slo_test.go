package caddymlc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// The SLO options parse into their config, and read a request's targets:
// its own headers first, then its tenant's defaults, then its band's.
func TestSLOCaddyfileAndTargets(t *testing.T) {
	d := caddyfile.NewTestDispenser(`mlc_router {
		model tiny
		mode whole
		endpoint 127.0.0.1:9001
		policy slo_aware
		tenant {http.request.header.X-Tenant}
		priority {http.request.header.X-Priority}
		slo_admission shed status 429 margin 50%
		tenant_slo chat ttft 300ms tpot 50ms
		priority_slo 0 ttft 5s
		priority_slo 2 tpot 20ms
	}`)
	var h Handler
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if want := (&SLOAdmission{Shed: true, Status: 429, Margin: 0.5}); !reflect.DeepEqual(h.SLOAdmission, want) {
		t.Fatalf("slo_admission %+v, want %+v", h.SLOAdmission, want)
	}
	if got := h.SLOAdmission.core(); got != (router.SLOAdmission{Shed: true, Status: 429, Margin: 0.5}) {
		t.Fatalf("core %+v", got)
	}
	if got := (&SLOAdmission{Shed: true}).core(); got.Status != http.StatusServiceUnavailable || got.Margin != router.DefaultSLOMargin {
		t.Fatalf("defaults %+v", got)
	}
	cases := []struct {
		headers map[string]string
		want    router.Targets
	}{
		{nil, router.Targets{TTFT: 5 * time.Second}},
		{map[string]string{"X-Tenant": "chat"}, router.Targets{TTFT: 300 * time.Millisecond, TPOT: 50 * time.Millisecond}},
		{map[string]string{"X-Tenant": "chat", "X-SLO-TTFT-Ms": "120"}, router.Targets{TTFT: 120 * time.Millisecond, TPOT: 50 * time.Millisecond}},
		{map[string]string{"X-Priority": "2", "X-SLO-TTFT-Ms": "80.5"}, router.Targets{TTFT: 80500 * time.Microsecond, TPOT: 20 * time.Millisecond}},
		{map[string]string{"X-Priority": "1", "X-SLO-TTFT-Ms": "soon", "X-SLO-TPOT-Ms": "-3"}, router.Targets{}},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		repl := caddy.NewReplacer()
		repl.Map(func(key string) (any, bool) {
			name, ok := strings.CutPrefix(key, "http.request.header.")
			return req.Header.Get(name), ok
		})
		req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, repl))
		if got := h.facts(req).Targets; got != c.want {
			t.Errorf("headers %v: targets %+v, want %+v", c.headers, got, c.want)
		}
	}
	h.SLOTTFT = "off"
	req := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
	req.Header.Set("X-SLO-TTFT-Ms", "100")
	if got := h.facts(req).Targets.TTFT; got != 5*time.Second {
		t.Errorf("slo_ttft off: TTFT target %v, want the band's 5s", got)
	}
}

func TestSLOCaddyfileErrors(t *testing.T) {
	for body, want := range map[string]string{
		"slo_admission maybe":           `slo_admission "maybe": want off or shed`,
		"slo_admission shed status 500": "slo_admission status 500: want 503 or 429",
		"slo_admission shed margin x":   `slo_admission margin "x"`,
		"slo_admission shed colour red": `unknown option "colour"`,
		"slo_admission off status 429":  "takes no options",
		"tenant_slo a ttft":             "wrong argument count",
		"tenant_slo a ttft soon":        `tenant_slo a: ttft "soon": want a positive duration`,
		"priority_slo high ttft 1s":     `priority_slo "high": want an integer band`,
		"priority_slo 1 p99 1s":         `unknown target "p99"`,
		"slo_ttft a\n\tslo_ttft b":      "slo_ttft given twice",
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\nendpoint a:1\n" + body + "\n}"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
}
