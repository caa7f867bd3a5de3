package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// Rapid reloads: reloads a second apart that move the engines between two
// port sets, under streaming clients. Every reload is accepted (new
// engines wait for the old ones on their ports, and for a port still
// taken), and every request completes exactly. Clients retry connection
// errors, the accept-queue race of any Caddy reload (docs/operations.md,
// "Reloads").
func TestRapidReloads(t *testing.T) {
	r := newRig(t, rigConfig{endpoints: []string{"", ""}, routerOpts: "\t\tmode whole\n"})
	var setA, setB strings.Builder
	for _, e := range r.status().Engines {
		fmt.Fprintf(&setA, "\t\tendpoint %s\n", e.Addr)
	}
	for _, p := range testnet.FreePorts(t, 2) {
		fmt.Fprintf(&setB, "\t\tendpoint 127.0.0.1:%d\n", p)
	}
	jobs := longJobs(8, 16)
	refs := r.references(jobs)
	var ta tally
	var retries sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range pick(8, 16) {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (c + k) % len(jobs)
				res := r.do(context.Background(), jobs[i], r.base)
				for try := 1; try <= 5 && res.err != "" && res.status == 0; try++ {
					retries.Store(fmt.Sprint(c, k, try), true)
					time.Sleep(time.Duration(try) * 20 * time.Millisecond) // a client's backoff
					res = r.do(context.Background(), jobs[i], r.base)
				}
				ta.add(res, refs[i])
			}
		})
	}
	n := pick(6, 30)
	refused := 0
	for i := range n {
		eps := setB.String()
		if i%2 == 1 {
			eps = setA.String()
		}
		if err := r.load(eps); err != nil {
			refused++
			t.Errorf("reload %d refused: %v", i, err)
		}
		time.Sleep(time.Second) // the scenario's pace: a reload a second
	}
	close(stop)
	wg.Wait()
	nretries := 0
	retries.Range(func(any, any) bool { nretries++; return true })
	fmt.Printf("chaos rapid-reloads: reloads=%d refused=%d client_retries=%d\n", n, refused, nretries)
	r.finish(&ta, "rapid-reloads", 5*time.Second)
}
