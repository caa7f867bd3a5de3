package chaos

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// A fleet one decode engine short: one decode engine is SIGKILLed again
// and again, each time as soon as it is ready, until its restarts back
// off for seconds (200 ms, doubling). The other decode engine alone
// cannot hold every stream's KV at its full length; with the prefill
// engine, which has KV to spare, they can. Streams that find no room on
// the decode engine (new ones, and those it preempts) are to be served
// whole by the prefill engine: every stream exact, and none waits longer
// than engine_timeout + 1 s (2 s + 1 s) for its next token, nor a new
// one for its first, while an engine has room.
//
// Before (issue 39) the survivor took every stream and preempted them,
// a resumed one again and again (it preempts the last admitted first),
// while the prefill engine generated nothing: gaps of 4.2–5.9 s in the
// long form, 2.1–5.0 s in the short one.
func TestDecodeShort(t *testing.T) {
	const engineTimeout = 2 * time.Second
	clients, tokens, kvTokens := pick(12, 20), pick(600, 1200), pick(5120, 16384)
	kills := pick(7, 10) // the last leaves it down 6.4 s (the short form), then 10 s (the cap)
	r := newRig(t, rigConfig{endpoints: disaggEngines, routerOpts: fmt.Sprintf(
		"\t\tengine_timeout %v\n\t\tengine_args --overrides max_total_seq_length=%d\n", engineTimeout, kvTokens)})
	jobs := longJobs(clients, tokens)
	refs := r.references(jobs)
	var ta tally
	stop := make(chan struct{})
	wait := r.loop(clients, jobs, refs, &ta, stop)
	const victim = 2
	e := r.waitBusy(victim)
	for range kills {
		if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r.waitRestarted(victim, e.PID)
		e = r.status().Engines[victim]
	}
	time.Sleep(pick(time.Second, 3*time.Second)) // the streams spread again
	close(stop)
	wait()
	// The survivor's counters cover the run (it never restarted): what
	// it preempted, the prefill engine, with room, was to generate.
	survivor, err := engineMetrics(r.status().Engines[1].Addr)
	if err != nil {
		t.Fatal(err)
	}
	prefill, err := engineMetrics(r.status().Engines[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("survivor: %v preemptions, %v tokens generated; prefill engine: %v generated, %v preemptions",
		survivor["preemptions"], survivor["decode_tokens"], prefill["decode_tokens"], prefill["preemptions"])
	if survivor["preemptions"] > 0 && prefill["decode_tokens"] == 0 {
		t.Errorf("the decode engine preempted %v times and the prefill engine, with KV to spare, generated nothing", survivor["preemptions"])
	}
	goal := engineTimeout + time.Second
	if ta.worstTTFT > goal || ta.worstGap > goal {
		t.Errorf("the longest wait for a first token %v, between two tokens %v; goal %v", ta.worstTTFT, ta.worstGap, goal)
	}
	r.finish(&ta, "decode-short", goal)
}
