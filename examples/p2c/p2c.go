// Package p2c is a selection policy for mlc_router written outside its
// core, as any Caddy plugin is: the power of two choices. For each call
// it draws two engines at random (with replacement) and takes the less
// loaded of the two. Least-loaded choice sends a burst to the one engine
// that looked idlest; drawing two spreads it, and still avoids the busy
// engines almost as well (Mitzenmacher, "The Power of Two Choices in
// Randomized Load Balancing", 2001), which matters most when several
// Caddy replicas choose at once on the same, slightly stale, load.
//
// Importing the package registers the module
// http.handlers.mlc_router.selection_policies.p2c, which a Caddyfile
// names as
//
//	mlc_router {
//		...
//		policy p2c [<choices>]
//	}
//
// and JSON as "policy": {"policy": "p2c", "choices": 3}. A Caddy with it
// is Caddy's main with one more import (./caddy here):
//
//	import (
//		caddycmd "github.com/caddyserver/caddy/v2/cmd"
//		_ "github.com/caddyserver/caddy/v2/modules/standard"
//		_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
//		_ "github.com/caddy-mlc/caddy-mlc/examples/p2c"
//	)
//
//	func main() { caddycmd.Main() }
//
// A policy in a Go module of its own builds in with xcaddy, beside this
// one: xcaddy build --with github.com/caddy-mlc/caddy-mlc=<checkout>
// --with <its module>.
package p2c

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func init() {
	caddy.RegisterModule(P2C{})
}

// Interface guards.
var (
	_ router.Policy         = (*P2C)(nil)
	_ caddy.Provisioner     = (*P2C)(nil)
	_ caddy.Validator       = (*P2C)(nil)
	_ caddyfile.Unmarshaler = (*P2C)(nil)
)

// P2C chooses the least loaded of Choices engines drawn at random.
type P2C struct {
	// Choices is how many engines are drawn for each call: 1 is random
	// choice, as many as there are engines is about least loaded.
	// Default 2.
	Choices int `json:"choices,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (P2C) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mlc_router.selection_policies.p2c",
		New: func() caddy.Module { return new(P2C) },
	}
}

// Provision applies the default.
func (p *P2C) Provision(caddy.Context) error {
	if p.Choices == 0 {
		p.Choices = 2
	}
	return nil
}

// Validate checks the configuration.
func (p *P2C) Validate() error {
	if p.Choices < 1 {
		return fmt.Errorf("p2c: choices must be at least 1, got %d", p.Choices)
	}
	return nil
}

// UnmarshalCaddyfile reads `policy p2c [<choices>]`.
func (p *P2C) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the policy's name
	if !d.NextArg() {
		return nil
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return d.Errf("p2c: choices %q: want an integer of at least 1", d.Val())
	}
	p.Choices = n
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Choose draws p.Choices candidates and returns the least loaded of them.
func (p *P2C) Choose(_ *router.Request, cands []router.Candidate) int {
	best := rand.IntN(len(cands))
	for range p.Choices - 1 {
		if i := rand.IntN(len(cands)); load(&cands[i]) < load(&cands[best]) {
			best = i
		}
	}
	return best
}

// load is a candidate's work: its calls (this Caddy's and what the engine
// reported of others), a call still waiting for its first token counting
// twice, as its prefill is still to come.
func load(c *router.Candidate) float64 { return c.Calls() + float64(c.Prefilling) }
