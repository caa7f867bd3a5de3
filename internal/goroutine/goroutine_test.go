package goroutine

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestGoRecoversAndReports(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	got := make(chan any, 1)
	Go(zap.New(core), "test worker", func() { panic("boom") }, func(p any) { got <- p })
	if p := <-got; p != "boom" {
		t.Fatalf("onPanic got %v, want boom", p)
	}
	entries := logs.FilterMessage("panic recovered in test worker").All()
	if len(entries) != 1 {
		t.Fatalf("%d log entries, want 1: %+v", len(entries), logs.All())
	}
	if entries[0].ContextMap()["panic"] != "boom" {
		t.Fatalf("logged %v", entries[0].ContextMap())
	}
}

func TestGoWithoutPanicCallsNothing(t *testing.T) {
	done := make(chan struct{})
	Go(nil, "quiet", func() { close(done) }, func(any) { t.Error("onPanic called without a panic") })
	<-done
}

func TestCallReportsPanic(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	log := func() *zap.Logger { return zap.New(core) }
	if Call(log, "step", func() {}) {
		t.Error("Call reported a panic for a function that returned")
	}
	ran := false
	if !Call(log, "step", func() { ran = true; panic(42) }) || !ran {
		t.Error("Call did not report the panic")
	}
	if e := logs.FilterMessage("panic recovered in step").All(); len(e) != 1 || e[0].ContextMap()["panic"] != "42" {
		t.Errorf("logged %+v", logs.All())
	}
}

func TestEveryTicksUntilDoneAndSurvivesAPanic(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan int, 16)
	done := make(chan struct{})
	n := 0
	Every(ctx, zap.NewNop(), "test", func() time.Duration { return time.Millisecond }, func() {
		n++
		ticks <- n
		if n == 3 {
			cancel()
		}
	}, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not end after its context")
	}
	if got := len(ticks); got != 3 {
		t.Errorf("%d ticks, want 3", got)
	}

	panicked := make(chan struct{})
	Every(context.Background(), zap.NewNop(), "test", func() time.Duration { return time.Millisecond }, func() { panic("boom") }, func() { close(panicked) })
	select {
	case <-panicked:
	case <-time.After(10 * time.Second):
		t.Fatal("a panic did not end Every with done")
	}
}
