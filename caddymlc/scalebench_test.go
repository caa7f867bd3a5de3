package caddymlc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkScaleBurst is the scale proof at full size: a burst of
// 64 streams on `scale 1 3` over three endpoints (max_inflight 4,
// up_after 1s, down_after 2s, cooldown 1s). It reports how long after
// the burst began the first scale-up was decided and the second engine
// ready, the engines at the peak, the streams that failed or were not
// exact (both must be 0), and how long after the burst the pool was back
// to one engine.
//
//	go test -run '^$' -bench BenchmarkScaleBurst -benchtime 1x ./caddymlc
func BenchmarkScaleBurst(b *testing.B) {
	const streams, maxTokens = 64, 400
	for range b.N {
		s := startSite(b, 3, "\t\t\tmode whole\n\t\t\tmax_inflight 4\n\t\t\tscale 1 3 {\n\t\t\t\tup_after 1s\n\t\t\t\tdown_after 2s\n\t\t\t\tcooldown 1s\n\t\t\t}\n")
		prompt := func(i int) string { return fmt.Sprintf("burst %d: the tide comes in over the %d stones", i, i%7) }
		want := make([]string, streams)
		for i := range want {
			want[i] = reference(s, s.engines[0], greedy(prompt(i), maxTokens))
		}
		begin := time.Now()
		var bad atomic.Int64
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() {
				if err := s.streamExact(s.base, greedy(prompt(i), maxTokens), want[i], func() {}); err != nil {
					bad.Add(1)
					b.Log(err)
				}
			})
		}
		burstDone := make(chan struct{})
		go func() { wg.Wait(); close(burstDone) }()
		var decided, secondReady, burst time.Duration
		peak := 0
		for {
			select {
			case <-burstDone:
				if burst == 0 {
					burst = time.Since(begin)
				}
			case <-time.After(20 * time.Millisecond): // sampling the status, as an operator's dashboard does
			}
			st := scaleStatus(b)
			if st.Target >= 2 && decided == 0 {
				decided = time.Since(begin)
			}
			if st.Ready >= 2 && secondReady == 0 {
				secondReady = time.Since(begin)
			}
			peak = max(peak, st.Ready)
			if burst > 0 && st.Target == 1 && st.Ready == 1 {
				break
			}
			if time.Since(begin) > 5*time.Minute {
				b.Fatalf("not back to one engine: %+v", st)
			}
		}
		b.ReportMetric(decided.Seconds(), "s-to-scale-up")
		b.ReportMetric(secondReady.Seconds(), "s-to-2nd-ready")
		b.ReportMetric(float64(peak), "peak-engines")
		b.ReportMetric(burst.Seconds(), "s-burst")
		b.ReportMetric((time.Since(begin) - burst).Seconds(), "s-back-to-1")
		b.ReportMetric(float64(bad.Load()), "failed-or-inexact")
		stopCaddy(b)
	}
}
