package caddymlc

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// Latency targets (SLOs) per request, as tenants and bands are read:
// placeholders for the request's own, then defaults per tenant and per
// priority band.
//
// Caddyfile:
//
//	slo_ttft     <placeholder>|off   (milliseconds; default {http.request.header.X-SLO-TTFT-Ms})
//	slo_tpot     <placeholder>|off   (milliseconds; default {http.request.header.X-SLO-TPOT-Ms})
//	tenant_slo   <tenant> [ttft <duration>] [tpot <duration>]
//	priority_slo <band> [ttft <duration>] [tpot <duration>]
type SLOs struct {
	// SLOTTFT is a request's time-to-first-token target in milliseconds,
	// from Caddy placeholders; default the header X-SLO-TTFT-Ms, "off"
	// for none. A value that is not a positive number is no target.
	SLOTTFT string `json:"slo_ttft,omitempty"`
	// SLOTPOT is its time-per-output-token target, the same way; default
	// the header X-SLO-TPOT-Ms.
	SLOTPOT string `json:"slo_tpot,omitempty"`
	// TenantSLOs are the targets of a tenant's requests that carry none.
	TenantSLOs map[string]SLOTargets `json:"tenant_slos,omitempty"`
	// PrioritySLOs are the targets of a band's requests that carry none
	// and whose tenant has none.
	PrioritySLOs map[int]SLOTargets `json:"priority_slos,omitempty"`
}

// SLOTargets are default latency targets; zero is none.
type SLOTargets struct {
	TTFT caddy.Duration `json:"ttft,omitempty"`
	TPOT caddy.Duration `json:"tpot,omitempty"`
}

// The placeholders of the targets by default.
const (
	defaultSLOTTFT = "{http.request.header.X-SLO-TTFT-Ms}"
	defaultSLOTPOT = "{http.request.header.X-SLO-TPOT-Ms}"
)

// targets reads req's latency targets: its own, else its tenant's, else
// its band's. Either target is taken alone.
func (s *SLOs) targets(req *http.Request, repl *caddy.Replacer, f router.Facts) router.Targets {
	t := router.Targets{
		TTFT: targetOf(req, repl, s.SLOTTFT, defaultSLOTTFT, "X-SLO-TTFT-Ms"),
		TPOT: targetOf(req, repl, s.SLOTPOT, defaultSLOTPOT, "X-SLO-TPOT-Ms"),
	}
	for _, d := range []SLOTargets{s.TenantSLOs[f.Tenant], s.PrioritySLOs[f.Band]} {
		if t.TTFT == 0 {
			t.TTFT = time.Duration(d.TTFT)
		}
		if t.TPOT == 0 {
			t.TPOT = time.Duration(d.TPOT)
		}
	}
	return t
}

// targetOf reads one target, in milliseconds, from the placeholder ph
// (def when empty; the default's header is read straight, the placeholder
// costing a replacer's pass over nothing).
func targetOf(req *http.Request, repl *caddy.Replacer, ph, def, header string) time.Duration {
	var v string
	switch {
	case ph == "off":
		return 0
	case ph == "" || ph == def:
		v = req.Header.Get(header)
	case repl != nil:
		v = repl.ReplaceAll(ph, "")
	}
	if v == "" {
		return 0
	}
	ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(ms > 0) || ms > float64(time.Hour/time.Millisecond) {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// parse reads one SLO line of the Caddyfile; seen holds the options
// already given.
func (s *SLOs) parse(d *caddyfile.Dispenser, seen map[string]bool) error {
	name := d.Val()
	switch name {
	case "slo_ttft", "slo_tpot":
		if seen[name] {
			return d.Errf("%s given twice", name)
		}
		seen[name] = true
		dst := &s.SLOTTFT
		if name == "slo_tpot" {
			dst = &s.SLOTPOT
		}
		return oneArg(d, dst)
	}
	args := d.RemainingArgs()
	if len(args) < 3 || len(args)%2 == 0 {
		return d.ArgErr()
	}
	var t SLOTargets
	for i := 1; i < len(args); i += 2 {
		dur, err := caddy.ParseDuration(args[i+1])
		if err != nil || dur <= 0 {
			return d.Errf("%s %s: %s %q: want a positive duration", name, args[0], args[i], args[i+1])
		}
		switch args[i] {
		case "ttft":
			t.TTFT = caddy.Duration(dur)
		case "tpot":
			t.TPOT = caddy.Duration(dur)
		default:
			return d.Errf("%s %s: unknown target %q (ttft, tpot)", name, args[0], args[i])
		}
	}
	if name == "tenant_slo" {
		if s.TenantSLOs == nil {
			s.TenantSLOs = map[string]SLOTargets{}
		}
		s.TenantSLOs[args[0]] = t
		return nil
	}
	band, err := strconv.Atoi(args[0])
	if err != nil {
		return d.Errf("priority_slo %q: want an integer band", args[0])
	}
	if s.PrioritySLOs == nil {
		s.PrioritySLOs = map[int]SLOTargets{}
	}
	s.PrioritySLOs[band] = t
	return nil
}
