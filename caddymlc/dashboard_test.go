package caddymlc

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// dashboardFile is the Grafana dashboard over the module's metrics.
const dashboardFile = "../examples/grafana/caddy-mlc.json"

// pendingMetrics are series the dashboard queries that the module does not
// export yet, with the labels they are to have: the test skips them,
// saying so, and fails once one is exported (then it is checked like the
// others, and leaves this list).
var pendingMetrics = map[string]struct {
	labels []string
	why    string
}{}

// scrapeLabels are the labels Prometheus adds to every series it scrapes.
var scrapeLabels = []string{"instance", "job"}

// Every series the dashboard's queries use is one the module exports (its
// routers' metrics, as they are registered with Caddy's registry), with
// labels it has; every label a query groups by or a legend names is one
// of them.
func TestDashboardSeries(t *testing.T) {
	exported := exportedSeries(t)
	queries := dashboardQueries(t)
	if len(queries) < 10 {
		t.Fatalf("%d queries in %s: the dashboard lost its panels?", len(queries), dashboardFile)
	}
	skipped := map[string]bool{}
	for _, q := range queries {
		sels, groups, err := parsePromQL(q.expr)
		if err != nil {
			t.Errorf("%s: %v: %s", q.where, err, q.expr)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: no series in %s", q.where, q.expr)
		}
		allowed := slices.Clone(scrapeLabels)
		for _, s := range sels {
			labels, ok := exported[s.metric]
			if !ok {
				p, pending := pendingMetrics[strings.TrimSuffix(s.metric, "_bucket")]
				if !pending {
					t.Errorf("%s: the module exports no series %s", q.where, s.metric)
					continue
				}
				if !skipped[s.metric] {
					t.Logf("skipping %s, which the module does not export yet (pending: %s)", s.metric, p.why)
					skipped[s.metric] = true
				}
				labels = p.labels
			}
			for _, l := range s.labels {
				if !slices.Contains(labels, l) && !slices.Contains(scrapeLabels, l) {
					t.Errorf("%s: %s has no label %q (it has %v)", q.where, s.metric, l, labels)
				}
			}
			allowed = append(allowed, labels...)
		}
		for _, g := range groups {
			if !slices.Contains(allowed, g) {
				t.Errorf("%s: grouped by %q, which none of its series has", q.where, g)
			}
		}
		// A legend names a label of the result: one the query groups by,
		// or, without a grouping, one of its series'.
		kept := groups
		if len(kept) == 0 {
			kept = allowed
		}
		for _, l := range legendLabels(q.legend) {
			if !slices.Contains(kept, l) {
				t.Errorf("%s: the legend names {{%s}}, which the query does not keep (%v)", q.where, l, kept)
			}
		}
		if q.label != "" && !slices.Contains(allowed, q.label) {
			t.Errorf("%s: label_values of %q, which none of its series has", q.where, q.label)
		}
	}
	for name := range pendingMetrics {
		if _, ok := exported[name]; ok {
			t.Errorf("%s is exported now: remove it from pendingMetrics", name)
		}
	}
}

// exportedSeries returns the series the routers' metrics export, each
// with its labels: what Provision registers with Caddy's registry
// (registerMetrics), read from the collectors' descriptions. A histogram exports <name>_bucket
// (with le), <name>_sum and <name>_count.
func exportedSeries(t *testing.T) map[string][]string {
	t.Helper()
	rec := &recordingRegisterer{}
	if err := registerMetrics(rec); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range rec.collectors {
		descs := make(chan *prometheus.Desc, 16)
		c.Describe(descs)
		close(descs)
		for d := range descs {
			name, labels, err := parseDesc(d.String())
			if err != nil {
				t.Fatal(err)
			}
			switch c.(type) {
			case prometheus.Histogram, *prometheus.HistogramVec:
				out[name+"_bucket"] = append(slices.Clone(labels), "le")
				out[name+"_sum"] = labels
				out[name+"_count"] = labels
			case prometheus.Counter, *prometheus.CounterVec, prometheus.Gauge, *prometheus.GaugeVec:
				out[name] = labels
			default:
				t.Fatalf("%s: a collector of type %T: teach the test its series", name, c)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the routers register no metric")
	}
	return out
}

// recordingRegisterer keeps what is registered with it.
type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

// descPattern reads a prometheus.Desc's String(): its name and variable
// labels (the last braces: help text may hold braces of its own).
var descPattern = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^{}]*)\}\}$`)

func parseDesc(s string) (string, []string, error) {
	m := descPattern.FindStringSubmatch(s)
	if m == nil {
		return "", nil, fmt.Errorf("cannot read the metric description %s", s)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		return "", nil, err
	}
	var labels []string
	for l := range strings.SplitSeq(m[2], ",") {
		if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
			labels = append(labels, l)
		}
	}
	return name, labels, nil
}

// query is one PromQL expression of the dashboard.
type query struct {
	where  string // the panel and target, or the variable
	expr   string
	legend string
	label  string // the label of a label_values() variable
}

// labelValues is Grafana's label_values(<selector>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// dashboardQueries returns the expressions of every panel's targets (rows
// included) and of the query variables.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []query
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, query{where: fmt.Sprintf("panel %q, target %s", p.Title, tg.RefID), expr: tg.Expr, legend: tg.LegendFormat})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // the older form: a bare string
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q.Query))
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(<selector>, <label>)", v.Name, q.Query)
			continue
		}
		out = append(out, query{where: "variable " + v.Name, expr: m[1], label: m[2]})
	}
	return out
}

type dashPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// legendLabels are the labels a legend format names ({{label}}).
func legendLabels(format string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`).FindAllStringSubmatch(format, -1) {
		out = append(out, m[1])
	}
	return out
}

// selector is a series a PromQL expression reads, with the labels its
// matchers name.
type selector struct {
	metric string
	labels []string
}

// Words of PromQL that are neither functions nor series.
var (
	groupingWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	keywords      = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan",
		// Aggregations, which may take their grouping before the parenthesis.
		"sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "group", "limitk", "limit_ratio"}
)

// parsePromQL reads the series an expression selects, with the labels of
// their matchers, and the labels it groups or matches by (by, without, on,
// ignoring, group_left, group_right). It knows as much PromQL as the dashboard uses:
// function and aggregation calls, grouping clauses, selectors with
// matchers, range brackets, strings, numbers, operators and Grafana's
// $variables.
func parsePromQL(expr string) (sels []selector, groups []string, err error) {
	s := expr
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
	}
	ident := func() string {
		j := i
		for i < len(s) && (isIdentByte(s[i]) || (i > j && s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		return s[j:i]
	}
	str := func() (string, error) {
		q := s[i]
		j := i + 1
		for j < len(s) && s[j] != q {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			return "", fmt.Errorf("unterminated string at %d", i)
		}
		v := s[i+1 : j]
		i = j + 1
		return v, nil
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"' || c == '\'' || c == '`':
			if _, err := str(); err != nil {
				return nil, nil, err
			}
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, nil, fmt.Errorf("unterminated range at %d", i)
			}
			i += j + 1
		case c == '$':
			i++
			ident() // a Grafana variable in an expression
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
				((s[i] == '-' || s[i] == '+') && (s[i-1] == 'e' || s[i-1] == 'E'))) {
				i++
			}
		case isIdentByte(c):
			word := ident()
			skipSpace()
			next := byte(0)
			if i < len(s) {
				next = s[i]
			}
			switch {
			case slices.Contains(groupingWords, word) && next == '(':
				j := strings.IndexByte(s[i:], ')')
				if j < 0 {
					return nil, nil, fmt.Errorf("unterminated %s clause at %d", word, i)
				}
				for l := range strings.SplitSeq(s[i+1:i+j], ",") {
					if l = strings.TrimSpace(l); !labelName.MatchString(l) {
						return nil, nil, fmt.Errorf("%s (%s): %q is not a label", word, s[i+1:i+j], l)
					}
					groups = append(groups, strings.TrimSpace(l))
				}
				i += j + 1
			case strings.EqualFold(word, "offset"):
				for i < len(s) && (isIdentByte(s[i]) || s[i] >= '0' && s[i] <= '9' || s[i] == '$') {
					i++ // the offset's duration
				}
			case next == '(' || slices.Contains(keywords, strings.ToLower(word)):
				// A call, or an operator word.
			default:
				sel := selector{metric: word}
				if next == '{' {
					i++
					for {
						skipSpace()
						if i >= len(s) {
							return nil, nil, fmt.Errorf("unterminated matchers of %s", word)
						}
						if s[i] == '}' {
							i++
							break
						}
						if s[i] == ',' {
							i++
							continue
						}
						label := ident()
						if label == "" {
							return nil, nil, fmt.Errorf("a matcher of %s without a label at %d", word, i)
						}
						skipSpace()
						for i < len(s) && strings.IndexByte("=!~", s[i]) >= 0 {
							i++
						}
						skipSpace()
						if i >= len(s) || (s[i] != '"' && s[i] != '\'' && s[i] != '`') {
							return nil, nil, fmt.Errorf("the matcher %s of %s has no string value", label, word)
						}
						if _, err := str(); err != nil {
							return nil, nil, err
						}
						sel.labels = append(sel.labels, label)
					}
				}
				sels = append(sels, sel)
			}
		default:
			i++ // an operator or a parenthesis
		}
	}
	return sels, groups, nil
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func isIdentByte(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// The PromQL reader finds series, matchers and groupings, and refuses what
// it cannot read.
func TestParsePromQL(t *testing.T) {
	sels, groups, err := parsePromQL(`histogram_quantile(0.99, sum by (le, step) (rate(caddy_mlc_microserving_step_seconds_bucket{instance=~"$instance", step!="a,b}"}[$__rate_interval]))) / on (step) x:y_total offset 5m > bool 1e-3`)
	if err != nil {
		t.Fatal(err)
	}
	want := []selector{{"caddy_mlc_microserving_step_seconds_bucket", []string{"instance", "step"}}, {"x:y_total", nil}}
	if fmt.Sprint(sels) != fmt.Sprint(want) {
		t.Errorf("selectors %v, want %v", sels, want)
	}
	if fmt.Sprint(groups) != fmt.Sprint([]string{"le", "step", "step"}) {
		t.Errorf("groups %v", groups)
	}
	for _, bad := range []string{`m{a="x"`, `m{a=x}`, `rate(m[5m)`, `m{="x"}`, `sum by (a (m)`} {
		if _, _, err := parsePromQL(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
