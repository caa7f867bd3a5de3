package builtin

import (
	"net/http"
	"slices"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// codeReleased is the error code a prep_recv answers when POST
// /microserving/release withdrew it while it waited for pages.
const codeReleased = "prep_recv_released"

// releaseEndpoint answers POST /microserving/release, caddy-mlc's
// extension of microserving (see [protocol.PathRelease]): a router gives
// back a reservation it abandoned, so that its pages serve queued work now
// rather than after prep_recv_timeout_ms.
func (s *server) releaseEndpoint(w http.ResponseWriter, r *http.Request) {
	var req protocol.ReleaseRequest
	perr := s.decodeDebugRequest(r, &req)
	if perr == nil && req.User == "" {
		perr = protocol.InvalidRequest("user", "release needs the user field of the prep_recv to undo")
	}
	if perr != nil {
		perr.Write(w)
		return
	}
	var released bool
	if err := s.e.do(func() { released = s.e.release(req.User) }); err != nil {
		unavailable(err).Write(w)
		return
	}
	protocol.WriteJSON(w, http.StatusOK, protocol.ReleaseResponse{Released: released})
}

// release drops user's prep_recv reservation and withdraws its prep_recvs
// that still wait for pages, whose calls then answer an error; it reports
// whether there was any. The step that follows every command offers the
// freed pages to queued work (scheduler goroutine).
func (e *Engine) release(user string) bool {
	e.released[user] = time.Now().Add(e.opts.Overrides.PrepRecvTimeout)
	pages, released := 0, false
	if s, ok := e.prepared[user]; ok {
		pages, released = len(s.pages), true
		e.dropPrepared(user)
	}
	e.pendingPrep = slices.DeleteFunc(e.pendingPrep, func(w *prepWait) bool {
		if w.user != user {
			return false
		}
		w.done <- prepResult{err: protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeInvalidRequest,
			"prep_recv of user %q was released while it waited for KV pages", user).WithCode(codeReleased)}
		released = true
		return true
	})
	if released {
		e.logf("release %q: %d reserved pages freed", user, pages)
	}
	return released
}
