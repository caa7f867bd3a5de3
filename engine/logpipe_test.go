package engine

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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

func TestOutputPump(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	long := strings.Repeat("x", maxLogLine+100)
	in := fmt.Sprintf("one\r\n%s\ntwo\nlast without newline", long)
	tail := newRing(tailLines)
	var seen []string
	o := &output{log: func() *zap.Logger { return zap.New(core) }, stream: "stderr", pid: 42, tail: tail,
		onLine: func(l string) { seen = append(seen, l) }}
	o.pump(strings.NewReader(in))
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
		if m := e.ContextMap(); m["stream"] != "stderr" || m["pid"] != int64(42) {
			t.Errorf("entry %q without stream and pid: %v", e.Message, m)
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

// A panic while logging a line costs that line only; a reader that keeps
// panicking still drains the pipe, so the engine never blocks writing.
func TestOutputPumpSurvivesPanics(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := func() *zap.Logger { return zap.New(core) }
	o := &output{log: log, stream: "stdout", tail: newRing(tailLines), onLine: func(l string) {
		if strings.HasPrefix(l, "boom") {
			panic("bad line " + l)
		}
	}}
	o.pump(strings.NewReader("one\nboom 1\ntwo\n"))
	if n := logs.FilterMessage("panic recovered in engine output reader").Len(); n != 1 {
		t.Errorf("%d panics logged, want 1", n)
	}
	if logs.FilterMessage("two").Len() != 1 {
		t.Errorf("the line after the panic was not logged: %v", logs.All())
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	written := make(chan error, 1)
	go func() { // 4 MiB: far more than a pipe holds
		line := "boom " + strings.Repeat("b", 1000) + "\n"
		var err error
		for i := 0; i < 4096 && err == nil; i++ {
			_, err = io.WriteString(w, line)
		}
		w.Close()
		written <- err
	}()
	pumped := make(chan struct{})
	go func() { o.pump(r); close(pumped) }()
	select {
	case <-pumped:
	case <-time.After(30 * time.Second):
		t.Fatal("the pump stopped draining the pipe")
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessage("engine output reader panicked too often; discarding the rest of the stream").Len() != 1 {
		t.Error("giving up on logging was not logged")
	}
	if n := logs.FilterMessage("panic recovered in engine output reader").Len(); n != 1+maxOutputPanics {
		t.Errorf("%d panics logged, want %d", n, 1+maxOutputPanics)
	}
}

func TestLineLevel(t *testing.T) {
	for line, want := range map[string]zapcore.Level{
		"[2025-01-01 10:00:00] INFO auto_device.py:79: Found device: cuda:0":     zapcore.DebugLevel,
		"INFO:     Uvicorn running on http://127.0.0.1:8000":                     zapcore.DebugLevel,
		"[2025-01-01 10:00:00] WARNING auto_config.py:50: no sliding window":     zapcore.WarnLevel,
		"WARNING:  Invalid HTTP request received.":                               zapcore.WarnLevel,
		"/usr/lib/python3/site.py:12: UserWarning: deprecated":                   zapcore.WarnLevel,
		"[10:00:00] /src/runtime.cc:80: Warning: falling back":                   zapcore.WarnLevel,
		"ERROR:    [Errno 98] error while attempting to bind on address":         zapcore.ErrorLevel,
		"Traceback (most recent call last):":                                     zapcore.ErrorLevel,
		"[2025-01-01 10:00:00] CRITICAL engine.py:10: out of memory":             zapcore.ErrorLevel,
		"panic: runtime error: index out of range [3] with length 3":             zapcore.ErrorLevel,
		"fatal error: concurrent map writes":                                     zapcore.ErrorLevel,
		"mlc-engine: 2025/01/01 10:00:00 request 7 done: 12 prompt tokens":       zapcore.DebugLevel,
		"mlc-engine: 2025/01/01 10:00:00 serving m on 127.0.0.1:8000":            zapcore.DebugLevel,
		"mlc-engine: http: panic serving 127.0.0.1:5000: boom":                   zapcore.ErrorLevel,
		"mlc-engine: 2025/01/01 10:00:00 shutdown: error closing listener":       zapcore.ErrorLevel,
		"mlc-engine: listen: listen tcp 127.0.0.1:8000: bind: address in use":    zapcore.WarnLevel,
		`mlc-engine: override "gpu_memory_utilization" is ignored by the engine`: zapcore.WarnLevel,
		"fake engine: listening on 127.0.0.1:8000":                               zapcore.DebugLevel,
		"": zapcore.DebugLevel,
	} {
		if got := lineLevel(line); got != want {
			t.Errorf("lineLevel(%q) = %v, want %v", line, got, want)
		}
	}
}
