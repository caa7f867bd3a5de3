package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Party keys, as flags and tables name them.
const (
	keySplit  = "split"
	keyDirect = "direct"
	keyProxy  = "reverse_proxy"
	keyRouter = "mlc_router"
	keyDisagg = "disagg"
)

// party is one way of reaching the engines: a client straight to them, or
// a Caddy in front.
type party struct {
	key   string
	label string
	urls  []string   // base URLs; requests take them in turn
	caddy *caddyProc // nil when the client talks to engines itself
	http  *http.Client
	next  atomic.Uint64
}

func newParty(key, label string, caddy *caddyProc, urls ...string) *party {
	if caddy != nil {
		urls = []string{caddy.base}
	}
	return &party{key: key, label: label, urls: urls, caddy: caddy, http: newClient(256)}
}

// url returns the base URL of the next request: for a party of several
// engines, each in turn, as a client-side balancer would.
func (p *party) url() string {
	if len(p.urls) == 1 {
		return p.urls[0]
	}
	return p.urls[(p.next.Add(1)-1)%uint64(len(p.urls))]
}

// newClient is the bench's HTTP/1.1 client: keep-alive connections for
// every concurrent request, no compression (the engines send none), and
// deadlines on every phase.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       5 * time.Minute,
		ResponseHeaderTimeout: time.Minute,
		DisableCompression:    true,
	}}
}

// tracked returns the parties measured by the rounds, in the order of the
// first round (later rounds rotate it).
func tracked(engines []string, proxy, router, disagg *caddyProc) []*party {
	urls := make([]string, len(engines))
	for i, e := range engines {
		urls[i] = "http://" + e
	}
	return []*party{
		newParty(keySplit, "split (client to both engines)", nil, urls...),
		newParty(keyProxy, "reverse_proxy round_robin", proxy),
		newParty(keyRouter, "mlc_router whole", router),
		newParty(keyDisagg, "mlc_router disagg", disagg),
		newParty(keyDirect, "one engine direct", nil, urls[0]),
	}
}

// measure samples the party's Caddy: CPU time and memory from /proc, and
// the Go runtime's allocation counters from its admin endpoint. A party
// without a Caddy has nothing to sample.
func (p *party) measure(ctx context.Context) (caddySample, error) {
	if p.caddy == nil {
		return caddySample{}, nil
	}
	return p.caddy.sample(ctx)
}

// overhead reads the router's histogram of its own part of the time to
// first token; a party without a router has an empty one.
func (p *party) overhead(ctx context.Context) (histogram, error) {
	if p.caddy == nil {
		return histogram{}, nil
	}
	return p.caddy.readOverhead(ctx)
}

// waitServing sends a one-token completion until one is answered: a
// router may answer /v1/models before its health checks have found the
// engines ready. It gives up after startTimeout.
func (p *party) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	body := []byte(`{"model":"tiny","prompt":[5,6,7],"max_tokens":1,"temperature":0}`)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s := p.do(ctx, body, false)
		if s.err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s answers no completion: %w", p.key, s.err)
		case <-tick.C:
		}
	}
}
