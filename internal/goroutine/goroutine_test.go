package goroutine

import (
	"testing"

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
