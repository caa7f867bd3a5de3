package mlccheck

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Status is the outcome of one check.
type Status string

// The outcomes. A skipped check is not a failure: it could not apply (the
// mode, the engine program, a missing tokenizer), and its reason says why.
const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Skipped Status = "skipped"
)

// Result is one row of the report.
type Result struct {
	// Router is where the mlc_router handler is in the JSON config.
	Router string `json:"router"`
	// Model is the model of the handler whose engines were checked (the
	// name clients use).
	Model string `json:"model"`
	// Check names what was checked (see the Check* constants).
	Check string `json:"check"`
	// Engines are the engines checked, host:port; a pair of prefill and
	// decode engines in that order. Empty for a check of no engine.
	Engines []string `json:"engines"`
	Status  Status   `json:"status"`
	Reason  string   `json:"reason"`
}

// The checks.
const (
	CheckConfig           = "config"
	CheckModels           = "models"
	CheckCompletion       = "completion"
	CheckCompletionString = "completion_string"
	CheckContextLength    = "context_length"
	CheckEmbeddings       = "embeddings"
	CheckNVSHMEMWorld     = "nvshmem_world"
	CheckDisagg           = "disagg"
	CheckDisaggPrefix     = "disagg_prefix"
	CheckKVMetadata       = "kv_metadata"
	CheckUserIDs          = "user_ids"
	CheckRelease          = "release"
)

// Report is every result of a run, in the order the checks ran.
type Report struct {
	Results []Result `json:"results"`
}

func (r *Report) add(res Result) {
	if res.Engines == nil {
		res.Engines = []string{}
	}
	r.Results = append(r.Results, res)
}

// Counts returns how many checks passed, failed and were skipped.
func (r *Report) Counts() (passed, failed, skipped int) {
	for _, res := range r.Results {
		switch res.Status {
		case Pass:
			passed++
		case Fail:
			failed++
		default:
			skipped++
		}
	}
	return passed, failed, skipped
}

// OK reports whether no check failed.
func (r *Report) OK() bool {
	_, failed, _ := r.Counts()
	return failed == 0
}

// jsonReport is the --json form.
type jsonReport struct {
	OK      bool     `json:"ok"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Skipped int      `json:"skipped"`
	Results []Result `json:"results"`
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	p, f, s := r.Counts()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(jsonReport{OK: f == 0, Passed: p, Failed: f, Skipped: s, Results: r.Results})
}

// WriteTable writes the report as a table, one block per model of a
// router.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, res := range r.Results {
		if i == 0 || res.Router != r.Results[i-1].Router || res.Model != r.Results[i-1].Model {
			if i > 0 {
				fmt.Fprintln(tw)
			}
			fmt.Fprintf(tw, "mlc_router %s, model %s\n", res.Router, res.Model)
			fmt.Fprintln(tw, "CHECK\tENGINES\tRESULT\tREASON")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Check, engineList(res.Check, res.Engines), strings.ToUpper(string(res.Status)), oneLine(res.Reason))
	}
	p, f, s := r.Counts()
	fmt.Fprintf(tw, "\n%d passed, %d failed, %d skipped\n", p, f, s)
	return tw.Flush()
}

// engineList names the engines of a row; a pair of the disagg checks as
// prefill -> decode.
func engineList(check string, engines []string) string {
	switch {
	case len(engines) == 0:
		return "-"
	case len(engines) == 2 && (check == CheckDisagg || check == CheckDisaggPrefix):
		return engines[0] + " -> " + engines[1]
	}
	return strings.Join(engines, ",")
}

// oneLine keeps a reason on its row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
