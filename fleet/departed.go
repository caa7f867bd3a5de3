package fleet

import (
	"context"
	"slices"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// leave drains the engine at addr, which its source no longer lists:
// it takes no new request; those on it finish there for the drain grace,
// then move, exactly, to the other engines (Fleet.Drain). It
// stays listed, draining, until nothing runs on it; then it is let go.
// The caller holds d.mu.
func (d *Discovery) leave(ctx context.Context, addr string) {
	lf := d.held[addr]
	delete(d.held, addr)
	d.gone[addr] = lf
	u := lf.Upstreams()[0]
	d.log.Info("dynamic engine gone; it drains", zap.String("engine", addr), zap.Duration("grace", d.grace))
	lf.Drain(0, d.grace)
	goroutine.Go(d.log, "dynamic engine drain", func() {
		if err := lf.WaitDrained(ctx, 0, d.grace); err != nil && ctx.Err() == nil {
			d.log.Warn("a gone dynamic engine did not drain; letting it go", zap.String("engine", addr), zap.Error(err))
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gone[addr] != lf {
			return // back in the source, or let go by stop
		}
		delete(d.gone, addr)
		d.release(addr)
		d.forget(u)
		d.log.Info("gone dynamic engine drained and let go", zap.String("engine", addr))
	}, nil)
}

// comeBack takes back an engine that drains after it left the source and
// is listed again: it is in rotation again. The caller holds d.mu.
func (d *Discovery) comeBack(addr string) *Fleet {
	lf := d.gone[addr]
	if lf == nil {
		return nil
	}
	delete(d.gone, addr)
	d.held[addr] = lf
	lf.Undrain(0)
	d.log.Info("dynamic engine back while it drained", zap.String("engine", addr))
	return lf
}

// keepGone lists the draining gone engines among the engines of any
// role: operators see them drain, and a drain by address finds them; no
// request is given them. The caller holds d.mu.
func (d *Discovery) keepGone(byRole map[string][]*router.Upstream) {
	for _, lf := range d.gone {
		byRole[""] = append(byRole[""], lf.Upstreams()[0])
	}
}

// forget takes u off the listed engines. The caller holds d.mu.
func (d *Discovery) forget(u *router.Upstream) {
	old := *d.engines.Load()
	next := make(map[string][]*router.Upstream, len(old))
	for role, us := range old {
		next[role] = slices.DeleteFunc(slices.Clone(us), func(v *router.Upstream) bool { return v == u })
	}
	d.engines.Store(&next)
	d.live.EnginesChanged()
}
