package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestQuickReplacesOnlyTheDefaults(t *testing.T) {
	c, err := parseConfig([]string{"-quick", "-conc", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.rounds != 1 || !slices.Equal(c.concs, []int{4}) || !slices.Equal(c.maxTokens, []int{16}) || !slices.Equal(c.idle, []int{200}) {
		t.Errorf("quick config: rounds %d, conc %v, max-tokens %v, idle %v; want 1, [4] (given), [16], [200]", c.rounds, c.concs, c.maxTokens, c.idle)
	}
	full, err := parseConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if full.rounds != 3 || len(full.rows()) != 12 {
		t.Errorf("full config: %d rounds, %d rows; want 3 and 12 (3 concurrencies × 2 modes × 2 lengths)", full.rounds, len(full.rows()))
	}
	if n := full.requests(row{conc: 64}); n != 6*64 {
		t.Errorf("requests at concurrency 64 = %d, want %d", n, 6*64)
	}
	if n := full.requests(row{conc: 1}); n != 32 {
		t.Errorf("requests at concurrency 1 = %d, want the minimum, 32", n)
	}
}

func TestConfigRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-conc", "0"},
		{"-conc", "x"},
		{"-stream", "maybe"},
		{"-idle-proto", "h3"},
		{"-profile-party", "nginx"},
		{"-rounds", "0"},
		{"-check"},
		{"-fairness", "-flood", "0"},
		{"-fairness", "-samples", "-1"},
		{"-replicas", "3"},
		{"-fairness", "-replicas", "0"},
		{"-budgets"},
		{"-budgets", "-replicas", "3", "-fairness"},
		{"-budgets", "-replicas", "3", "-budget-limit", "0"},
		{"-long-tokens", "1000"},
		{"-longprompt", "-long-tokens", "-1"},
		{"-longprompt", "-agents"},
		{"-longprompt", "-long-chunk", "-64"},
		{"extra"},
	} {
		if _, err := parseConfig(args, io.Discard); err == nil {
			t.Errorf("parseConfig(%q): no error", args)
		}
	}
}

func TestRowNamesRoundTrip(t *testing.T) {
	c, err := parseConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.rows() {
		got, err := parseRow(r.name())
		if err != nil || got != r {
			t.Errorf("parseRow(%q) = %+v, %v; want %+v", r.name(), got, err, r)
		}
	}
	for _, bad := range []string{"16-stream-64", "c16-streamed-64", "c0-plain-16", "c16-plain", "c16-plain-x"} {
		if _, err := parseRow(bad); err == nil {
			t.Errorf("parseRow(%q): no error", bad)
		}
	}
}

func TestCaddyfileText(t *testing.T) {
	text := caddyfileWith(2019, 8000, "/tmp/x", true, "", mlcDisagg("127.0.0.1:1", "127.0.0.1:2"))
	for _, want := range []string{"admin 127.0.0.1:2019", "protocols h1 h2c", "http://127.0.0.1:8000 {", "\tbind 127.0.0.1\n",
		"\t\tendpoint 127.0.0.1:1 role prefill external\n", "\t\tendpoint 127.0.0.1:2 role decode external\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("Caddyfile lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(caddyfile(1, 2, "/s", false, reverseProxy([]string{"a:1"})), "h2c") {
		t.Error("h2c in a Caddyfile that did not ask for it")
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"-idle": "-idle", "": "''", "1,16": "1,16", "/tmp/a b": "'/tmp/a b'", "it's": `'it'\''s'`} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFairnessDefaults(t *testing.T) {
	full, err := parseConfig([]string{"-fairness"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if full.flood != 64 || full.floodTokens != 128 || full.bStreams != 8 || full.check {
		t.Errorf("full form: flood %d × %d tokens, B %d streams, check %v; want issue 23's 64 × 128, 8, false", full.flood, full.floodTokens, full.bStreams, full.check)
	}
	if full.bStreams >= fairEngines*fairBatch {
		t.Errorf("B's %d streams would take every one of the %d slots: A starves", full.bStreams, fairEngines*fairBatch)
	}
	quick, err := parseConfig([]string{"-fairness", "-quick", "-flood", "10", "-check"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if quick.flood != 10 || quick.floodTokens >= full.floodTokens || quick.samples >= full.samples || !quick.check {
		t.Errorf("quick form: flood %d (given 10), %d tokens, %d samples, check %v", quick.flood, quick.floodTokens, quick.samples, quick.check)
	}
	names := []string{}
	for _, sc := range full.scenarios() {
		names = append(names, sc.name)
	}
	if !slices.Equal(names, []string{"B alone", "A floods", "both flood, B in band 1"}) {
		t.Errorf("scenarios %q", names)
	}
}

func TestConfigReplicas(t *testing.T) {
	full, err := parseConfig([]string{"-budgets", "-replicas", "3", "-check"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	quick, err := parseConfig([]string{"-budgets", "-replicas", "3", "-quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if full.budgetWindow != time.Minute || quick.budgetWindow >= full.budgetWindow || quick.budgetLimit >= full.budgetLimit {
		t.Errorf("budgets: full %v × %d, quick %v × %d", full.budgetWindow, full.budgetLimit, quick.budgetWindow, quick.budgetLimit)
	}
	if one, err := parseConfig([]string{"-fairness"}, io.Discard); err != nil || one.replicas != 1 {
		t.Errorf("-fairness alone: replicas %v, %v; want 1", one, err)
	}
}
