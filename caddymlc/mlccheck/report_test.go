package mlccheck

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// The table has a block per router, a pair as prefill -> decode, each
// reason on its row and the counts; the JSON has the same rows.
func TestReportForms(t *testing.T) {
	var r Report
	r.add(Result{Router: "r1", Model: "m", Check: CheckModels, Engines: []string{"a:1"}, Status: Pass, Reason: "serves tiny"})
	r.add(Result{Router: "r1", Model: "m", Check: CheckDisagg, Engines: []string{"a:1", "b:2"}, Status: Fail, Reason: "two\nlines"})
	r.add(Result{Router: "r2", Model: "m", Check: CheckConfig, Status: Skipped, Reason: "dynamic"})
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{"mlc_router r1, model m\n", "mlc_router r2, model m\n", "a:1 -> b:2", "FAIL", "two lines", "1 passed, 1 failed, 1 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if r.OK() {
		t.Error("OK with a failure")
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back jsonReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.OK || back.Passed != 1 || back.Failed != 1 || back.Skipped != 1 || len(back.Results) != 3 || back.Results[2].Engines == nil {
		t.Fatalf("JSON %+v", back)
	}
}
