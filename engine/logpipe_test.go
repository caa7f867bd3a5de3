package engine

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestRing(t *testing.T) {
	r := newRing(3)
	if r.String() != "" {
		t.Errorf("empty ring = %q", r.String())
	}
	r.add("a")
	r.add("b")
	if r.String() != "a\nb" {
		t.Errorf("ring = %q", r.String())
	}
	for _, l := range []string{"c", "d", "e"} {
		r.add(l)
	}
	if r.String() != "c\nd\ne" {
		t.Errorf("ring = %q, want the last 3", r.String())
	}
}

func TestLogLines(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	long := strings.Repeat("x", maxLogLine+100)
	in := fmt.Sprintf("one\r\n%s\ntwo\nlast without newline", long)
	tail := newRing(tailLines)
	var seen []string
	logLines(strings.NewReader(in), "stderr", zap.New(core), tail, func(l string) { seen = append(seen, l) })
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
		if e.ContextMap()["stream"] != "stderr" {
			t.Errorf("entry %q without stream", e.Message)
		}
	}
	want := []string{"one", long[:maxLogLine], "two", "last without newline"}
	if strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Errorf("logged %d lines %.40q..., want %d", len(msgs), msgs, len(want))
	}
	if logs.All()[1].ContextMap()["truncated"] != true {
		t.Error("long line not marked truncated")
	}
	if strings.Join(seen, "|") != strings.Join(want, "|") || !strings.HasSuffix(tail.String(), "two\nlast without newline") {
		t.Error("onLine or tail missed lines")
	}
}
