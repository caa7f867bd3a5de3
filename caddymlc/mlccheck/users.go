package mlccheck

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// userIDs checks, on decode engine d, what the router relies on of the
// user field, which MLC takes as a request's id (docs/operations.md,
// "MLC's request ids"): every attempt has a user of its own, so an
// attempt whose reservation was given back (the release extension, or on MLC a
// start_generate that uses it up) leaves nothing that the next attempt
// of the same prompt, with its own user, would read; and a local prefill
// after a failed remote_send, whose user is the attempt's with "-local",
// is served beside the attempt's reservation still held.
func (ck *checker) userIDs(ctx context.Context, d int) {
	i := slices.IndexFunc(ck.r.prefill, func(p int) bool { return p != d && ck.answered[p] })
	if i < 0 {
		ck.skip(CheckUserIDs, []int{d}, "no prefill engine to pair the decode engine with")
		return
	}
	p := ck.r.prefill[i]
	name := fmt.Sprintf("users-%d", d)
	ids := ck.p.ids(name, 40)
	want, err := ck.alone(ctx, p, ids)
	if err != nil {
		ck.fail(CheckUserIDs, []int{d}, "the prompt on the prefill engine %s alone: %v", ck.r.addr(p), err)
		return
	}

	// An attempt that gives its reservation back.
	first := microserving(ids, ck.user(name+"-1"))
	_, end, err := ck.prepRecv(ctx, d, first)
	if err != nil {
		ck.fail(CheckUserIDs, []int{d}, "attempt 1: %v", err)
		return
	}
	how, err := ck.giveBack(ctx, d, first, end)
	if err != nil {
		ck.fail(CheckUserIDs, []int{d}, "attempt 1, giving its reservation back: %v", err)
		return
	}

	// The next attempt, with a user of its own.
	res, err := ck.flow(ctx, p, d, ids, ck.user(name+"-2"))
	switch {
	case err != nil:
		ck.fail(CheckUserIDs, []int{d}, "attempt 2, after attempt 1 gave its reservation back by %s: %v", how, err)
		return
	case res.text != want:
		ck.fail(CheckUserIDs, []int{d}, "attempt 2, after attempt 1 gave its reservation back by %s (%d tokens matched): %q, the prefill engine alone %q",
			how, res.matched, res.text, want)
		return
	}

	ck.localBesideReservation(ctx, d, ids, ck.user(name+"-3"), want, how)
}

// localBesideReservation checks, for userIDs, that a local prefill (user
// <id>-local) is served beside the reservation of the attempt user still
// holds on decode engine d, with the text want; how is how attempt 1 gave
// its reservation back, for the report.
func (ck *checker) localBesideReservation(ctx context.Context, d int, ids []int, user, want, how string) {
	third := microserving(ids, user)
	_, end, err := ck.prepRecv(ctx, d, third)
	if err != nil {
		ck.fail(CheckUserIDs, []int{d}, "attempt 3: %v", err)
		return
	}
	local := greedy(protocol.TokenPrompt(ids))
	local.User = new(*third.User + "-local")
	a, lerr := ck.c.complete(ctx, ck.r.url(d)+protocol.PathCompletions, local)
	_, gerr := ck.giveBack(ctx, d, third, end)
	switch {
	case lerr != nil:
		ck.fail(CheckUserIDs, []int{d}, "a local prefill (user %s) beside attempt 3's reservation: %v", *local.User, lerr)
	case a.text != want:
		ck.fail(CheckUserIDs, []int{d}, "a local prefill (user %s) beside attempt 3's reservation: %q, the prefill engine alone %q", *local.User, a.text, want)
	case gerr != nil:
		ck.fail(CheckUserIDs, []int{d}, "attempt 3, giving its reservation back: %v", gerr)
	default:
		ck.pass(CheckUserIDs, []int{d}, "a reservation given back (by %s), the next attempt, with a user of its own, gives the text; so does a local prefill (user <id>-local) beside a held reservation", how)
	}
}

// release checks caddy-mlc's release extension on every decode engine: a
// held reservation is released, a second release finds none, and a
// prep_recv of the released user that comes late is refused, so that a
// prep_recv the router gave up on before it arrived holds nothing.
func (ck *checker) release(ctx context.Context) {
	if ck.r.mlc() {
		ck.skip(CheckRelease, nil, "POST /microserving/release is caddy-mlc's extension; MLC's engines have none, and the router uses a reservation up with start_generate instead (see user_ids)")
		return
	}
	for _, d := range ck.r.decode {
		ck.onEngine(d, CheckRelease, func() { ck.releaseOn(ctx, d) })
	}
}

func (ck *checker) releaseOn(ctx context.Context, d int) {
	name := fmt.Sprintf("release-%d", d)
	req := microserving(ck.p.ids(name, 20), ck.user(name))
	_, end, err := ck.prepRecv(ctx, d, req)
	if err != nil {
		ck.fail(CheckRelease, []int{d}, "%v", err)
		return
	}
	url := ck.r.url(d) + protocol.PathRelease
	var ack protocol.ReleaseResponse
	err = ck.c.postJSON(ctx, url, protocol.ReleaseRequest{User: *req.User}, &ack)
	switch {
	case isNotFound(err):
		if err := ck.useUp(ctx, d, req, end); err != nil {
			ck.log.Warn("could not use a reservation up", zap.String("engine", ck.r.addr(d)), zap.Error(err))
		}
		ck.skip(CheckRelease, []int{d}, "the engine has no release extension (%d): the router uses a reservation up with start_generate instead (see user_ids)", statusOf(err))
		return
	case err != nil:
		ck.fail(CheckRelease, []int{d}, "%v", err)
		return
	case !ack.Released:
		ck.fail(CheckRelease, []int{d}, "the release of a held reservation answered released: false")
		return
	}
	ack = protocol.ReleaseResponse{}
	if err := ck.c.postJSON(ctx, url, protocol.ReleaseRequest{User: *req.User}, &ack); err != nil {
		ck.fail(CheckRelease, []int{d}, "a second release: %v", err)
		return
	}
	if ack.Released {
		ck.fail(CheckRelease, []int{d}, "a second release of the same user answered released: true")
		return
	}
	_, _, err = ck.prepRecv(ctx, d, req)
	if err == nil {
		ck.fail(CheckRelease, []int{d}, "the engine reserved KV again for a user the router released: a prep_recv that arrives after the router gave it up holds pages until the engine's own timeout")
		return
	}
	ck.pass(CheckRelease, []int{d}, "a held reservation released, a second release finds none, a late prep_recv of the released user refused (%d)", statusOf(err))
}
