package router

import (
	"errors"
	"fmt"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// SplitRoles returns the indices of the endpoints that may prefill and
// that may decode. With no role given anywhere, MLC's rule holds: the
// first endpoint prefills, the others decode. Otherwise an endpoint without
// a role, or with role "any", may do both.
func SplitRoles(eps []engine.Endpoint) (prefill, decode []int, err error) {
	explicit := false
	for _, ep := range eps {
		if ep.Role != "" {
			explicit = true
		}
	}
	for i, ep := range eps {
		role := ep.Role
		if role == "" {
			role = engine.RoleAny
		}
		if !explicit {
			role = engine.RoleDecode
			if i == 0 {
				role = engine.RolePrefill
			}
		}
		if role == engine.RolePrefill || role == engine.RoleAny {
			prefill = append(prefill, i)
		}
		if role == engine.RoleDecode || role == engine.RoleAny {
			decode = append(decode, i)
		}
	}
	switch {
	case len(eps) == 0:
		return nil, nil, errors.New("disagg mode needs endpoints")
	case len(prefill) == 0:
		return nil, nil, missingRole(engine.RolePrefill, len(eps), explicit)
	case len(decode) == 0:
		return nil, nil, missingRole(engine.RoleDecode, len(eps), explicit)
	}
	return prefill, decode, nil
}

// missingRole says that no endpoint can take role, with the fix that fits
// the config as written: a lone endpoint without roles needs a second one
// (MLC's rule then gives it decode) or role any; with roles given, one
// endpoint must take the missing role, which for a lone endpoint means
// adding one.
func missingRole(role string, endpoints int, explicit bool) error {
	var hint string
	switch {
	case !explicit:
		hint = "add a second endpoint (the first prefills, the others decode), or give this one role any"
	case endpoints == 1:
		hint = fmt.Sprintf("add an endpoint with role %s, or give this one role any", role)
	default:
		hint = fmt.Sprintf("give one of them role %s (or any)", role)
	}
	return fmt.Errorf("disagg mode needs an endpoint that can %s: %s", role, hint)
}

// RoleName is a role as logs and policies name it: "any" for "".
func RoleName(role string) string {
	if role == "" {
		return engine.RoleAny
	}
	return role
}

func RoleNames(roles []string) []string {
	out := make([]string, len(roles))
	for i, r := range roles {
		out[i] = RoleName(r)
	}
	return out
}
