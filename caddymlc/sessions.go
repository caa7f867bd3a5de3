package caddymlc

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// Sessions route a conversation's turns to the engine that served its
// last, whose prefix cache holds it (router.Sessions): a request names
// its session by OpenAI's prompt_cache_key (chat, Responses, and
// completions too), the session of Anthropic's metadata.user_id, or the
// header named here. On by default while the engines keep a prefix
// cache; bounded by load (balance). Not an MLC option.
//
// Caddyfile:
//
//	sessions off | [header <name>] [balance <calls> <ratio>] [ttl <duration>]
type Sessions struct {
	// Off routes every turn as a new request.
	Off bool `json:"off,omitempty"`
	// Header names a request header whose value is a session's key,
	// taken before the body's. Default: none.
	Header string `json:"header,omitempty"`
	// BalanceCalls and BalanceRatio bound the hint by load: a session's
	// engine is passed over when it has more than BalanceCalls calls more
	// than the least loaded engine and more than BalanceRatio times its
	// calls. Default 8 and 1.5.
	BalanceCalls int     `json:"balance_calls,omitempty"`
	BalanceRatio float64 `json:"balance_ratio,omitempty"`
	// TTL is how long a session not heard from is remembered. Default
	// 30m.
	TTL caddy.Duration `json:"ttl,omitempty"`
}

func (s *Sessions) validate() error {
	switch {
	case s == nil:
		return nil
	case s.BalanceCalls < 0:
		return fmt.Errorf("sessions balance %d: want 0 or more calls", s.BalanceCalls)
	case s.BalanceRatio != 0 && s.BalanceRatio < 1:
		return fmt.Errorf("sessions balance ratio %v: want 1 or more", s.BalanceRatio)
	case s.TTL < 0:
		return fmt.Errorf("sessions ttl %v: want a positive duration", time.Duration(s.TTL))
	}
	return nil
}

// core is the routing core's form; the core applies the defaults.
func (s *Sessions) core() router.Sessions {
	if s == nil {
		return router.Sessions{}
	}
	return router.Sessions{Off: s.Off, Header: s.Header, BalanceAbs: s.BalanceCalls, BalanceRel: s.BalanceRatio, TTL: time.Duration(s.TTL)}
}

// parseSessions reads `sessions off | [header <name>] [balance <calls>
// <ratio>] [ttl <duration>]`.
func parseSessions(m *ModelConfig, d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	s := &Sessions{}
	if len(args) == 1 && args[0] == "off" {
		s.Off = true
		m.Sessions = s
		return nil
	}
	for i := 0; i < len(args); i++ {
		var err error
		need := map[string]int{"header": 1, "balance": 2, "ttl": 1}[args[i]]
		if need == 0 {
			return d.Errf("sessions: unknown option %q (off, header, balance, ttl)", args[i])
		}
		if i+need >= len(args) {
			return d.Errf("sessions %s: want %d value(s)", args[i], need)
		}
		switch args[i] {
		case "header":
			s.Header = args[i+1]
		case "balance":
			if s.BalanceCalls, err = strconv.Atoi(args[i+1]); err == nil {
				s.BalanceRatio, err = strconv.ParseFloat(args[i+2], 64)
			}
		case "ttl":
			var ttl time.Duration
			ttl, err = caddy.ParseDuration(args[i+1])
			s.TTL = caddy.Duration(ttl)
		}
		if err != nil {
			return d.Errf("sessions %s: %v", args[i], err)
		}
		i += need
	}
	if err := s.validate(); err != nil {
		return d.Err(err.Error())
	}
	m.Sessions = s
	return nil
}
