package mlccheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcstack"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Against MLC's own serving layer (mlc_llm serve's entrypoints and Python
// engine, over a stand-in core: internal/testkit/mlcstack) with engine mlc, every
// check that uses MLC's API passes, and the checks of caddy-mlc's
// extensions are skipped, saying so.
func TestMLCServingLayer(t *testing.T) {
	st := mlcstack.Setup(t)
	servers := st.Start(t, mlcstack.Options{Servers: 2, Disaggregation: true})
	var models protocol.ModelList
	if err := newClient(time.Minute).getJSON(context.Background(), servers[0].URL+protocol.PathModels, &models); err != nil || len(models.Data) != 1 {
		t.Fatalf("the MLC server's models: %+v, %v", models, err)
	}
	var eps []string
	for i, s := range servers {
		role := "decode"
		if i == 0 {
			role = "prefill"
		}
		eps = append(eps, fmt.Sprintf("%s gpus 1 role %s external", s.Addr, role))
	}
	run := runCheck(t, caddyfile("model "+models.Data[0].ID+"\nengine mlc\nmode disagg\nprefix_cache radix", eps...), false)
	if run.status != ExitPassed {
		t.Fatalf("exit %d (%v), want 0", run.status, run.err)
	}
	for _, check := range []string{CheckModels, CheckCompletion, CheckDisagg, CheckDisaggPrefix, CheckKVMetadata, CheckUserIDs} {
		rows := run.results(check, "")
		if len(rows) == 0 {
			t.Errorf("no %s row", check)
		}
		for _, r := range rows {
			if r.Status != Pass {
				t.Errorf("%s: %+v, want a pass", check, r)
			}
		}
	}
	for _, check := range []string{CheckNVSHMEMWorld, CheckRelease} {
		rows := run.results(check, "")
		if len(rows) != 1 || rows[0].Status != Skipped || !strings.Contains(rows[0].Reason, "extension") {
			t.Errorf("%s: %+v, want one row skipped as an extension", check, rows)
		}
	}
}
