package router

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// TestSLOAdmissionHolds checks the gate's decision against a made-up
// fleet: served when the engines can meet the target or nobody knows;
// refused at once when even an idle engine would be late; held while the
// engines drain, then served; refused once waiting has spent the
// target; a higher band tolerating more.
func TestSLOAdmissionHolds(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	a := SLOAdmission{Shed: true, Status: http.StatusServiceUnavailable, Margin: 0.2}
	chat := Facts{Targets: Targets{TTFT: ms(100)}}
	fixed := func(best, floor time.Duration) sloPredictor {
		return func(int) (time.Duration, time.Duration, bool) { return best, floor, true }
	}
	ctx := context.Background()
	if err := a.hold(ctx, fixed(ms(110), ms(10)), chat, 10, time.Now()); err != nil {
		t.Fatalf("110 ms predicted, 100 ms target and a 20%% margin: %v", err)
	}
	if err := a.hold(ctx, func(int) (time.Duration, time.Duration, bool) { return 0, 0, false }, chat, 10, time.Now()); err != nil {
		t.Fatalf("no model: %v", err)
	}
	if err := a.hold(ctx, fixed(ms(900), ms(10)), Facts{}, 10, time.Now()); err != nil {
		t.Fatalf("no target: %v", err)
	}

	begin := time.Now()
	err := a.hold(ctx, fixed(ms(900), ms(200)), chat, 10, begin)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusServiceUnavailable || pe.RetryAfter <= 0 || pe.Code == nil || *pe.Code != "slo_unattainable" {
		t.Fatalf("an idle engine 200 ms late: %v, want a 503 slo_unattainable with Retry-After", err)
	}
	if took := time.Since(begin); took > 50*time.Millisecond {
		t.Fatalf("refused after %v: it should not wait", took)
	}

	calls := 0
	draining := func(int) (time.Duration, time.Duration, bool) {
		calls++
		if calls < 4 {
			return ms(400), ms(10), true
		}
		return ms(20), ms(10), true
	}
	if err := a.hold(ctx, draining, chat, 10, time.Now()); err != nil || calls < 4 {
		t.Fatalf("engines draining: %v after %d looks, want served after 4", err, calls)
	}

	begin = time.Now()
	err = a.hold(ctx, fixed(ms(400), ms(60)), chat, 10, begin)
	if !errors.As(err, &pe) || time.Since(begin) < ms(60) {
		t.Fatalf("engines that never drain: %v after %v, want a refusal after about 60 ms of waiting", err, time.Since(begin))
	}

	band2 := chat
	band2.Band = 2 // tolerates 3 margins: 160 ms
	if err := a.hold(ctx, fixed(ms(150), ms(10)), band2, 10, time.Now()); err != nil {
		t.Fatalf("band 2, 150 ms predicted: %v", err)
	}
	a.Status = http.StatusTooManyRequests
	if err := a.hold(ctx, fixed(ms(900), ms(200)), chat, 10, time.Now()); !errors.As(err, &pe) || pe.Status != http.StatusTooManyRequests {
		t.Fatalf("status 429: %v", err)
	}
}
