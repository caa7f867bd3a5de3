package caddymlc

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkServe measures completions through the router in each mode and,
// for comparison, straight to one engine: requests/s and generated
// tokens/s with 4 concurrent clients, 32-token prompts, 32 new tokens.
//
//	go test -run '^$' -bench BenchmarkServe -benchtime 40x ./caddymlc
func BenchmarkServe(b *testing.B) {
	for _, mode := range []string{"direct", "disagg", "round_robin"} {
		b.Run(mode, func(b *testing.B) {
			opts := "\t\t\tmode " + mode + "\n"
			if mode == "direct" {
				opts = "\t\t\tmode whole\n"
			}
			s := startSite(b, 2, opts)
			url := s.base
			if mode == "direct" {
				url = s.engines[0]
			}
			prompt := "the quick brown fox jumps over the lazy dog while a small bird sings in the old tree near the river and the sun goes down on the long day"
			const clients, tokens = 4, 32
			var wg sync.WaitGroup
			var mu sync.Mutex
			var ttft time.Duration
			next := make(chan int)
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Go(func() {
					for range next {
						st, err := s.stream(context.Background(), url, greedy(prompt, tokens))
						if err != nil || !st.done {
							b.Error(err)
							return
						}
						mu.Lock()
						ttft += st.firstAfter
						mu.Unlock()
					}
				})
			}
			for i := 0; i < b.N; i++ {
				next <- i
			}
			close(next)
			wg.Wait()
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/el, "req/s")
			b.ReportMetric(float64(b.N*tokens)/el, "tokens/s")
			b.ReportMetric(float64(ttft.Milliseconds())/float64(b.N), "ms-ttft")
		})
	}
}
