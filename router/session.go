package router

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// Sessions: an agent resends its whole conversation every turn, and the
// engine that served the last turn holds all of it in its prefix cache.
// The turns of one session name it: OpenAI's prompt_cache_key (Codex
// sends its thread; OpenAI documents it as the key its cache routing
// reads), the session in Anthropic's metadata.user_id (Claude Code's),
// or a request header the operator names. The router remembers where
// each session's last turn went, by role (the decode engine and the
// prefill engine of a disaggregated turn each hold its prefix), and
// sends the next turn there unless that engine is busier than the rest
// by more than the balance allows: then the policy chooses, as for any
// request (prefix_aware by the cache and the load, least_loaded by the
// load), and the session's engine becomes the one chosen. An engine that
// cannot take the turn (saturated, failed it, its breaker open, gone) is
// not in the tier the policy chooses from, and is passed over the same
// way.
//
// The hint works with every policy, prefix_aware's index or none: the
// session's engine holds its prefix whatever any index says. Policies see
// it too (Request.Session, Candidate.SessionHome). What the table keeps
// of a session is a hash of its key, never the key, and the hashes of a
// few of its last prompt's KV pages (sessionMarks), from which the
// router expects what the engine holds (cacheaccount.go). Replicas share
// it through package cluster (sessionshare.go), so that a session whose
// turns reach different replicas still goes to its engine.

// Sessions configure the session hint.
type Sessions struct {
	// Off turns the hint off: every turn is routed as a new request.
	// The router also ignores it when the engines keep no prefix cache.
	Off bool
	// Header names a request header whose value is a session's key; it
	// takes precedence over the body's. "": none.
	Header string
	// BalanceAbs and BalanceRel bound the hint by load: a session's
	// engine is passed over when its calls (this Caddy's in flight and
	// what the engine reports of others') exceed the least loaded
	// candidate's by more than BalanceAbs and are more than BalanceRel
	// times them. 0: DefaultSessionBalanceAbs, DefaultSessionBalanceRel.
	BalanceAbs int
	BalanceRel float64
	// TTL is how long a session not heard from is remembered; 0:
	// DefaultSessionTTL.
	TTL time.Duration
}

// Defaults of Sessions. SGLang's cache-aware router turns to the
// shortest queue when its busiest worker runs 64 requests more than the
// idlest and 1.5 times its load, for workers that run hundreds at once;
// the engines here run from 8 (the built-in engine) to some tens (a GPU
// engine's batch): 8 calls more is a whole small batch ahead, which a
// session waits behind rather than prefill its history elsewhere, and
// beyond which one client's traffic under one key spreads. An agent's
// turns are seconds to minutes apart (the time its tools take); a
// session idle for half an hour has likely lost its prefix to others.
const (
	DefaultSessionBalanceAbs = 8
	DefaultSessionBalanceRel = 1.5
	DefaultSessionTTL        = 30 * time.Minute
	// maxSessions bounds the sessions a process remembers, over its
	// models and roles; the least recently heard from go first.
	maxSessions = 1 << 16
)

// sessionsActive says whether the router routes by sessions: they are
// on, and the engines keep a prefix cache for them to return to.
func (c *Config) sessionsActive() bool { return !c.Sessions.Off && c.cachesPrefixes() }

// cachesPrefixes says whether the engines keep a prefix cache (the
// prefix_cache option; "" is its default, radix).
func (c *Config) cachesPrefixes() bool { return c.PrefixCache != engine.PrefixCacheDisable }

// keeps reports whether the session's engine, views[home], keeps the
// session: it is not busier than the least loaded candidate by more than
// the balance allows.
func (s Sessions) keeps(views []Candidate, home int) bool {
	h := views[home].Calls()
	least := h
	for i := range views {
		least = min(least, views[i].Calls())
	}
	abs, rel := float64(s.BalanceAbs), s.BalanceRel
	if abs <= 0 {
		abs = DefaultSessionBalanceAbs
	}
	if rel <= 0 {
		rel = DefaultSessionBalanceRel
	}
	return h-least <= abs || h <= rel*least
}

// ttl is TTL or its default.
func (s Sessions) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultSessionTTL
}

// sessionID is the hash a session's key is known by: the first 8 bytes of
// its SHA-256, never 0 (0 is no session). A key may carry what a client
// considers private (an account); the hash does not give it back.
func sessionID(key string) uint64 {
	if key == "" {
		return 0
	}
	sum := sha256.Sum256([]byte(key))
	return max(binary.BigEndian.Uint64(sum[:8]), 1)
}

// sessionHeader is the session key the operator's header gives, "" for
// none.
func (r *Router) sessionHeader(hreq *http.Request) string {
	if r.Sessions.Header == "" {
		return ""
	}
	return hreq.Header.Get(r.Sessions.Header)
}

// SessionLabel is how logs name a session: its hash in hex.
func SessionLabel(id uint64) string { return fmt.Sprintf("%016x", id) }

// Outcomes of a session's routing (caddy_mlc_session_routes_total).
const (
	sessionHome      = "home"      // its engine kept it
	sessionNew       = "new"       // no engine known: the policy chose
	sessionLoad      = "load"      // its engine was busier than the balance allows
	sessionElsewhere = "elsewhere" // its engine could not take it (not in the best tier, or gone)
)

// sessionChoice returns the index in views of the session's engine when
// it keeps the session, else -1, marking it SessionHome for the policy;
// outcome names what happened (empty for a request of no session).
func (r *Router) sessionChoice(req *Request, role string, views []Candidate, now time.Time) (i int, outcome string) {
	if req.Session == 0 || !r.sessionsActive() {
		return -1, ""
	}
	home, ok := r.live.sessions.home(sessionKeyOf(req, role), now, r.Sessions.ttl())
	if !ok {
		return -1, sessionNew
	}
	for k := range views {
		if views[k].Addr != home.engine {
			continue
		}
		views[k].SessionHome = true
		if r.Sessions.keeps(views, k) {
			return k, sessionHome
		}
		return -1, sessionLoad
	}
	return -1, sessionElsewhere
}

// sessionKey names a session's engine of one role, in one model.
type sessionKey struct {
	model   string
	session uint64
	role    string
}

func sessionKeyOf(req *Request, role string) sessionKey {
	return sessionKey{model: req.Model, session: req.Session, role: RoleName(role)}
}

// sessionEntry is where a session's last turn of a role went.
type sessionEntry struct {
	key    sessionKey
	engine string // its address
	marks  []PrefixMark
	seen   time.Time
}

// sessionTable is the sessions a process remembers, least recently heard
// from last, bounded by maxSessions.
type sessionTable struct {
	mu  sync.Mutex
	lru list.List // of *sessionEntry, most recent first
	m   map[sessionKey]*list.Element
}

// home returns where the session's last turn went, unless it is older
// than ttl (then forgotten).
func (t *sessionTable) home(k sessionKey, now time.Time, ttl time.Duration) (sessionEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[k]
	if !ok {
		return sessionEntry{}, false
	}
	s := e.Value.(*sessionEntry)
	if now.Sub(s.seen) > ttl {
		t.removeLocked(e)
		return sessionEntry{}, false
	}
	return *s, true
}

// set records where the session's turn went.
func (t *sessionTable) set(s sessionEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[sessionKey]*list.Element{}
	}
	if e, ok := t.m[s.key]; ok {
		*e.Value.(*sessionEntry) = s
		t.lru.MoveToFront(e)
		return
	}
	t.m[s.key] = t.lru.PushFront(&s)
	for t.lru.Len() > maxSessions {
		t.removeLocked(t.lru.Back())
	}
}

// len is how many sessions the table holds.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}

func (t *sessionTable) removeLocked(e *list.Element) {
	delete(t.m, e.Value.(*sessionEntry).key)
	t.lru.Remove(e)
}

// PrefixMark is one page of a prompt's prefix chain: Pages pages long,
// its chained hash Hash (see prefixChain).
type PrefixMark struct {
	Pages int
	Hash  uint64
}

// sessionMarks are the marks a session keeps of its last prompt's chain:
// its pages at powers of two, eight evenly spaced and its last, so that
// the next turn's match is known to within an eighth of the prompt, in
// at most some 25 hashes whatever its length.
func sessionMarks(chain []uint64) []PrefixMark {
	n := len(chain)
	if n == 0 {
		return nil
	}
	pages := []int{n}
	for p := 1; p < n; p *= 2 {
		pages = append(pages, p)
	}
	for k := 1; k < 8; k++ {
		pages = append(pages, max(k*n/8, 1))
	}
	slices.Sort(pages)
	pages = slices.Compact(pages)
	out := make([]PrefixMark, len(pages))
	for i, p := range pages {
		out[i] = PrefixMark{Pages: p, Hash: chain[p-1]}
	}
	return out
}

// marksMatch is how many tokens of chain the marks are known to cover:
// the longest mark chain shares.
func marksMatch(marks []PrefixMark, chain []uint64) int {
	best := 0
	for _, m := range marks {
		if m.Pages <= len(chain) && chain[m.Pages-1] == m.Hash {
			best = max(best, m.Pages)
		}
	}
	return best * kvPageTokens
}
