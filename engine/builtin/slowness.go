package builtin

import (
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// slownessEndpoint replaces the engine's Slowness (an extension, see
// protocol.PathSlowness) and answers the one it replaced.
func (s *server) slownessEndpoint(w http.ResponseWriter, r *http.Request) {
	var req protocol.Slowness
	perr := s.decodeDebugRequest(r, &req)
	if perr == nil && s.e.timed != nil {
		perr = protocol.InvalidRequest("", "a timed engine's time follows its profile (--timing %s): no slowness adds to it", s.e.timed.profile.Name)
	}
	if perr == nil {
		if err := req.Validate(); err != nil {
			perr = protocol.InvalidRequest("", "%s", err)
		}
	}
	if perr != nil {
		perr.Write(w)
		return
	}
	old := s.e.Slowness()
	s.e.SetSlowness(req)
	s.e.logf("slowness now %v per prompt token, %v per decode step", req.PrefillPerToken, req.DecodePerStep)
	protocol.WriteJSON(w, http.StatusOK, old)
}
