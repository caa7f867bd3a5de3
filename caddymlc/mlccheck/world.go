package mlccheck

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// worldReport is what an engine says of its NVSHMEM world, in the
// usage.extra of a query_engine_metrics request (caddy-mlc's extension).
type worldReport struct {
	peStart, npes int
	uid           string // digest; "" when not reported
}

// queryWorld asks engine i for its NVSHMEM world; ok is false when the
// engine reports none.
func (ck *checker) queryWorld(ctx context.Context, i int) (w worldReport, ok bool, err error) {
	special := protocol.SpecialQueryEngineMetrics
	req := &protocol.CompletionRequest{Prompt: protocol.TokenPrompt([]int{0}), MaxTokens: new(1),
		DebugConfig: &protocol.DebugConfig{SpecialRequest: &special}}
	var resp protocol.CompletionResponse
	if err := ck.c.postJSON(ctx, ck.r.url(i)+protocol.PathCompletions, req, &resp); err != nil {
		return w, false, err
	}
	if resp.Usage == nil {
		return w, false, nil
	}
	x := resp.Usage.Extra
	if json.Unmarshal(x[protocol.ExtraPEStart], &w.peStart) != nil || json.Unmarshal(x[protocol.ExtraNPEs], &w.npes) != nil {
		return w, false, nil
	}
	_ = json.Unmarshal(x[protocol.ExtraUIDDigest], &w.uid)
	return w, true, nil
}

// world checks that every engine is where the config places it in the
// NVSHMEM world (its pe_start is the router's recv_rank for it, its world
// as large as the config's) and that the engines agree on the world's uid.
// Only caddy-mlc's engines report their world; for MLC's the check is
// skipped.
func (ck *checker) world(ctx context.Context) {
	r := ck.r
	if r.mlc() {
		ck.skip(CheckNVSHMEMWorld, nil, "pe_start, npes and the uid digest in query_engine_metrics are caddy-mlc's extension; MLC's engines do not report their NVSHMEM world (the disagg checks still prove it)")
		return
	}
	npes := r.starts[len(r.starts)-1]
	problems := make([][]string, len(r.cfg.Endpoints))
	uids := map[string][]int{}
	var reported []int
	for i := range r.cfg.Endpoints {
		if !ck.answered[i] {
			ck.skip(CheckNVSHMEMWorld, []int{i}, "the engine did not answer (see models)")
			continue
		}
		w, ok, err := ck.queryWorld(ctx, i)
		switch {
		case err != nil:
			ck.fail(CheckNVSHMEMWorld, []int{i}, "query_engine_metrics: %v", err)
			continue
		case !ok && r.kind.Driver().Traits().Extensions == engine.ExtensionsAll:
			ck.fail(CheckNVSHMEMWorld, []int{i}, "the engine reports no NVSHMEM world: it was started without %s, and can neither send nor receive KV", protocol.EnvNVSHMEMConfig)
			continue
		case !ok:
			ck.skip(CheckNVSHMEMWorld, []int{i}, "the engine does not report its NVSHMEM world (caddy-mlc's extension of query_engine_metrics)")
			continue
		}
		ck.pe[i] = w.peStart
		reported = append(reported, i)
		if w.peStart != r.starts[i] {
			msg := fmt.Sprintf("it says its first PE is %d; the config makes it PE %d (the recv_rank the router sends KV to)", w.peStart, r.starts[i])
			if j := r.peOwner(w.peStart); j >= 0 {
				msg += fmt.Sprintf(", where PE %d is %s's", w.peStart, r.addr(j))
			}
			problems[i] = append(problems[i], msg)
		}
		if w.npes != npes {
			problems[i] = append(problems[i], fmt.Sprintf("its world has %d PEs; the config's has %d", w.npes, npes))
		}
		uids[w.uid] = append(uids[w.uid], i)
	}
	if len(uids) > 1 {
		common := commonUID(uids, reported)
		for uid, engines := range uids {
			if uid == common {
				continue
			}
			for _, i := range engines {
				problems[i] = append(problems[i], fmt.Sprintf("its NVSHMEM uid (sha256 %s) is not the one the other engines share (%s): it was started apart from them", short(uid), short(common)))
			}
		}
	}
	for _, i := range reported {
		if len(problems[i]) > 0 {
			ck.fail(CheckNVSHMEMWorld, []int{i}, "%s", strings.Join(problems[i], "; "))
			continue
		}
		ck.pass(CheckNVSHMEMWorld, []int{i}, "PE %d of %d, uid sha256 %s, as the config places it", ck.pe[i], npes, short(ck.uidOf(uids, i)))
	}
}

// commonUID is the uid most engines report; among equals, that of the
// first engine.
func commonUID(uids map[string][]int, order []int) string {
	best, n := "", -1
	for _, i := range order {
		for uid, engines := range uids {
			if engines[0] == i && len(engines) > n {
				best, n = uid, len(engines)
			}
		}
	}
	return best
}

func (ck *checker) uidOf(uids map[string][]int, i int) string {
	for uid, engines := range uids {
		for _, j := range engines {
			if j == i {
				return uid
			}
		}
	}
	return ""
}

// short abbreviates a digest.
func short(digest string) string {
	if digest == "" {
		return "(none)"
	}
	return digest[:min(len(digest), 12)]
}

// peOwner is the endpoint whose GPUs hold PE pe in the config, or -1.
func (h *handler) peOwner(pe int) int {
	for j := range len(h.starts) - 1 {
		if pe >= h.starts[j] && pe < h.starts[j+1] {
			return j
		}
	}
	return -1
}
