package engine

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// resolveTimeout bounds all the host lookups of one ValidateEndpoints.
const resolveTimeout = 2 * time.Second

// checkAliases fails when two endpoints on the same port name the same
// listening address differently: 127.0.0.1:8581 and localhost:8581, or
// 0.0.0.0:8581 (every address) and anything else on port 8581. Both would
// pass a comparison of host:port strings, and at run time one engine would
// fail to bind while the other answered both readiness probes. Only the
// hosts of endpoints that share a port are resolved; a host that does not
// resolve (in time) is compared by name only.
func checkAliases(eps []Endpoint) error {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	cache := map[string][]netip.Addr{}
	resolve := func(host string) []netip.Addr {
		if ips, ok := cache[host]; ok {
			return ips
		}
		ips := lookupHost(ctx, host)
		cache[host] = ips
		return ips
	}
	for i, b := range eps {
		for j, a := range eps[:i] {
			if a.Port != b.Port {
				continue
			}
			ip, wildcard, ok := overlap(resolve(a.Host), resolve(b.Host))
			if !ok {
				continue
			}
			why := ""
			if wildcard {
				why = " (" + wildcardNote + ")"
			}
			return fmt.Errorf("%w: endpoints %d (%s) and %d (%s) both listen on %s%s", ErrInvalidSpec,
				j, a.Addr(), i, b.Addr(), netip.AddrPortFrom(ip, uint16(b.Port)), why)
		}
	}
	return nil
}

const wildcardNote = "0.0.0.0 and :: listen on every address"

// lookupHost returns the addresses of host: itself when it is an IP
// literal, else what the resolver says, or nothing when it cannot say.
func lookupHost(ctx context.Context, host string) []netip.Addr {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for k := range ips {
		ips[k] = ips[k].Unmap()
	}
	return ips
}

// overlap returns an address that both lists listen on, and whether it
// overlaps only through a wildcard (unspecified) address.
func overlap(a, b []netip.Addr) (ip netip.Addr, wildcard, ok bool) {
	for _, x := range a {
		for _, y := range b {
			switch {
			case x == y:
				return x, false, true
			case x.IsUnspecified():
				return y, true, true
			case y.IsUnspecified():
				return x, true, true
			}
		}
	}
	return netip.Addr{}, false, false
}
