package caddymlc

import (
	"fmt"
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
		TTFT: router.ParseTargetMs(targetOf(req, repl, s.SLOTTFT, defaultSLOTTFT, "X-SLO-TTFT-Ms")),
		TPOT: router.ParseTargetMs(targetOf(req, repl, s.SLOTPOT, defaultSLOTPOT, "X-SLO-TPOT-Ms")),
	}
	for _, d := range []SLOTargets{s.TenantSLOs[f.Tenant], s.PrioritySLOs[f.Band]} {
		t = t.Or(router.Targets{TTFT: time.Duration(d.TTFT), TPOT: time.Duration(d.TPOT)})
	}
	return t
}

// targetOf is the text of one target, from the placeholder ph (def when
// empty; the default's header is read straight, the placeholder costing
// a replacer's pass over nothing).
func targetOf(req *http.Request, repl *caddy.Replacer, ph, def, header string) string {
	switch {
	case ph == "off":
		return ""
	case ph == "" || ph == def:
		return req.Header.Get(header)
	case repl != nil:
		return repl.ReplaceAll(ph, "")
	}
	return ""
}

// parse reads one SLO line of the Caddyfile; seen holds the options
// already given.
func (s *SLOs) parse(d *caddyfile.Dispenser, seen map[string]bool) error {
	name := d.Val()
	switch name {
	case "slo_ttft", "slo_tpot":
		dst := &s.SLOTTFT
		if name == "slo_tpot" {
			dst = &s.SLOTPOT
		}
		return onceArg(d, seen, dst)
	}
	args := d.RemainingArgs()
	if len(args) < 3 || len(args)%2 == 0 {
		return d.ArgErr()
	}
	var t SLOTargets
	for i := 1; i < len(args); i += 2 {
		dur, err := positiveDuration(args[i+1])
		if err != nil {
			return d.Errf("%s %s: %s %q: want a positive duration", name, args[0], args[i], args[i+1])
		}
		switch args[i] {
		case "ttft":
			t.TTFT = dur
		case "tpot":
			t.TPOT = dur
		default:
			return d.Errf("%s %s: unknown target %q (ttft, tpot)", name, args[0], args[i])
		}
	}
	if name == "tenant_slo" {
		setKey(&s.TenantSLOs, args[0], t)
		return nil
	}
	band, err := strconv.Atoi(args[0])
	if err != nil {
		return d.Errf("priority_slo %q: want an integer band", args[0])
	}
	setKey(&s.PrioritySLOs, band, t)
	return nil
}

// SLOAdmission is admission against latency targets: a request predicted
// to miss its time-to-first-token target on every engine by more than
// Margin waits in the gate while waiting can still meet it, else is
// refused at once (router.SLOAdmission).
//
// Caddyfile:
//
//	slo_admission off|shed [status 503|429] [margin <fraction>]
type SLOAdmission struct {
	// Shed turns it on; false (Caddyfile: off) serves such requests late.
	Shed bool `json:"shed,omitempty"`
	// Status is the answer of a refused request: 503 (the default, with
	// Retry-After) or 429.
	Status int `json:"status,omitempty"`
	// Margin is how far over its target a request may be predicted and
	// still be served, as a share of the target; each priority band
	// above 0 tolerates one more. Default 0.2.
	Margin float64 `json:"margin,omitempty"`
}

func (a *SLOAdmission) validate() error {
	if a == nil {
		return nil
	}
	if a.Status != 0 && a.Status != http.StatusServiceUnavailable && a.Status != http.StatusTooManyRequests {
		return fmt.Errorf("slo_admission status %d: want 503 or 429", a.Status)
	}
	if a.Margin < 0 || a.Margin > 100 {
		return fmt.Errorf("slo_admission margin %v: want a fraction between 0 and 100", a.Margin)
	}
	return nil
}

// core is the routing core's form, defaults applied.
func (a *SLOAdmission) core() router.SLOAdmission {
	if a == nil || !a.Shed {
		return router.SLOAdmission{}
	}
	out := router.SLOAdmission{Shed: true, Status: a.Status, Margin: a.Margin}
	if out.Status == 0 {
		out.Status = http.StatusServiceUnavailable
	}
	if out.Margin == 0 {
		out.Margin = router.DefaultSLOMargin
	}
	return out
}

// parseSLOAdmission reads `slo_admission off|shed [status 503|429]
// [margin <fraction>]`.
func parseSLOAdmission(m *ModelConfig, d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args)%2 == 0 {
		return d.ArgErr()
	}
	a := &SLOAdmission{}
	switch args[0] {
	case "off":
		if len(args) > 1 {
			return d.Errf("slo_admission off takes no options")
		}
		m.SLOAdmission = a
		return nil
	case "shed":
		a.Shed = true
	default:
		return d.Errf("slo_admission %q: want off or shed", args[0])
	}
	for i := 1; i < len(args); i += 2 {
		var err error
		switch args[i] {
		case "status":
			a.Status, err = strconv.Atoi(args[i+1])
		case "margin":
			a.Margin, err = strconv.ParseFloat(strings.TrimSuffix(args[i+1], "%"), 64)
			if strings.HasSuffix(args[i+1], "%") {
				a.Margin /= 100
			}
		default:
			return d.Errf("slo_admission: unknown option %q (status, margin)", args[i])
		}
		if err != nil {
			return d.Errf("slo_admission %s %q: %v", args[i], args[i+1], err)
		}
	}
	if err := a.validate(); err != nil {
		return d.Err(err.Error())
	}
	m.SLOAdmission = a
	return nil
}
