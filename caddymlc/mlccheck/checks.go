package mlccheck

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// checker runs the checks of one router.
type checker struct {
	c      *client
	log    *zap.Logger
	report *Report
	r      *handler
	p      prompts
	// answered[i] says that engine i answered GET /v1/models: the
	// checks of an engine that did not are skipped.
	answered []bool
	// pe[i] is the first PE engine i reports (caddy-mlc's extension), -1
	// when it reports none.
	pe []int
	// preps are the prep_recv answers of the disagg checks, for the check
	// of their KV metadata.
	preps []prepRecord
	// embedDim is the length of the first engine's embedding vectors,
	// which every other engine's must have.
	embedDim int
}

func newChecker(c *client, log *zap.Logger, report *Report, r *handler, nonce string) *checker {
	n := len(r.cfg.Endpoints)
	ck := &checker{c: c, log: log, report: report, r: r, p: prompts{r: r, nonce: nonce},
		answered: make([]bool, n), pe: make([]int, n)}
	for i := range ck.pe {
		ck.pe[i] = -1
	}
	return ck
}

// run runs every check of the router, in order: an engine must answer
// before it is asked anything else, and the disagg checks learn from the
// world check what each engine says its PE is.
func (ck *checker) run(ctx context.Context) {
	r := ck.r
	if r.cfg.Dynamic != nil {
		ck.add(CheckConfig, nil, Skipped, "engines found by a dynamic source are not checked: they are known only while Caddy runs; list one (endpoint <host>:<port> external) to check it")
	}
	if len(r.cfg.Endpoints) == 0 {
		return
	}
	for i := range r.cfg.Endpoints {
		if ctx.Err() != nil {
			return
		}
		ck.models(ctx, i)
	}
	for _, c := range []struct {
		name string
		run  func(context.Context, int)
	}{{CheckCompletion, ck.completion}, {CheckCompletionString, ck.completionString}, {CheckContextLength, ck.contextLength}, {CheckEmbeddings, ck.embeddings}} {
		for i := range r.cfg.Endpoints {
			if ctx.Err() != nil {
				return
			}
			ck.onEngine(i, c.name, func() { c.run(ctx, i) })
		}
	}
	if !r.disagg() {
		why := fmt.Sprintf("mode %s: whole requests, no KV moves between engines", r.cfg.Mode)
		for _, check := range []string{CheckNVSHMEMWorld, CheckDisagg, CheckDisaggPrefix, CheckKVMetadata, CheckUserIDs, CheckRelease} {
			ck.add(check, nil, Skipped, why)
		}
		return
	}
	ck.world(ctx)
	ck.pairs(ctx)
	ck.kvMetadata()
	for _, d := range r.decode {
		ck.onEngine(d, CheckUserIDs, func() { ck.userIDs(ctx, d) })
	}
	ck.release(ctx)
}

// onEngine runs check on engine i, or skips it when the engine did not
// answer.
func (ck *checker) onEngine(i int, check string, run func()) {
	if !ck.answered[i] {
		ck.add(check, []int{i}, Skipped, "the engine did not answer (see models)")
		return
	}
	run()
}

// add records a result about the engines of the given indexes.
func (ck *checker) add(check string, engines []int, status Status, reason string) {
	addrs := make([]string, len(engines))
	for j, i := range engines {
		addrs[j] = ck.r.addr(i)
	}
	ck.report.add(Result{Router: ck.r.path, Model: ck.r.cfg.Model, Check: check, Engines: addrs, Status: status, Reason: reason})
	ck.log.Debug("check", zap.String("router", ck.r.name()), zap.String("check", check),
		zap.Strings("engines", addrs), zap.String("status", string(status)), zap.String("reason", reason))
}

func (ck *checker) pass(check string, engines []int, format string, args ...any) {
	ck.add(check, engines, Pass, fmt.Sprintf(format, args...))
}

func (ck *checker) fail(check string, engines []int, format string, args ...any) {
	ck.add(check, engines, Fail, fmt.Sprintf(format, args...))
}

func (ck *checker) skip(check string, engines []int, format string, args ...any) {
	ck.add(check, engines, Skipped, fmt.Sprintf(format, args...))
}
