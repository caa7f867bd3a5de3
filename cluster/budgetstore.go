package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-mlc/caddy-mlc/router/budget"
)

// BudgetStore keeps the budgets' buckets in Redis, shared by the
// replicas: a budget.Store whose Update is a compare-and-swap in one
// round trip. The limiter's own code computes the new State from the one
// this replica saw last (the bucket arithmetic stays in Go, exact in
// int64, where Lua's numbers are doubles); a script swaps it in if Redis
// still holds what was seen, else answers with what it holds, and the
// update is computed again on that. A tenant served by one replica costs
// one round trip an update; one whose requests several replicas share,
// two when another replica spent since.
//
// A bucket's key is <prefix>:budget:<sha256 of the limiter's key, hex>:
// no client string becomes a key. It expires when the bucket is full
// again, as MemoryStore drops it.
//
// While Redis is out of reach (Conn.Up) Update fails at once, without a
// call; a call past the Conn's timeout fails too, and takes the replica
// off Redis until the monitor finds it again. The Limiter's Fallback then
// decides (budget.Options).
type BudgetStore struct {
	conn  *Conn
	cache seenStates
	// turns take a replica's updates of one key one at a time (keys
	// share stripes): racing each other through Redis, they would lose
	// most races, each costing a round trip.
	turns [64]chan struct{}
}

// ErrDown is the error of an update while Redis is out of reach.
var ErrDown = errors.New("cluster: Redis out of reach")

// errContended is the error of an update that lost every race it ran.
var errContended = errors.New("cluster: budget update contended")

// maxSwaps bounds the attempts of one update, within the Conn's timeout:
// each lost race means another replica's update went through, and each
// attempt is a round trip of well under a millisecond. Even replicas
// hammering one tenant back to back (the tests) lose a dozen in a row
// only rarely.
const maxSwaps = 64

// swapScript sets KEYS[1] to ARGV[2] (with a time to live of ARGV[3]
// ms; ARGV[2] empty deletes it) if it holds ARGV[1] (empty: nothing),
// and answers {1}; else it answers {0, what it holds}.
var swapScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then cur = '' end
if cur ~= ARGV[1] then return {0, cur} end
if ARGV[2] == '' then
  if cur ~= '' then redis.call('DEL', KEYS[1]) end
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return {1}
`)

// NewBudgetStore returns the budgets' store on c's Redis.
func NewBudgetStore(c *Conn) *BudgetStore {
	s := &BudgetStore{conn: c}
	s.cache.states = map[string]seen{}
	for i := range s.turns {
		s.turns[i] = make(chan struct{}, 1)
	}
	return s
}

// Update implements budget.Store.
func (s *BudgetStore) Update(ctx context.Context, key string, fn func(*budget.State)) error {
	if !s.conn.Up() {
		return ErrDown
	}
	sum := sha256.Sum256([]byte(key))
	rkey := s.conn.Key("budget", hex.EncodeToString(sum[:]))
	callCtx, cancel := context.WithTimeout(ctx, s.conn.Timeout())
	defer cancel()
	turn := s.turns[binary.LittleEndian.Uint64(sum[:8])%uint64(len(s.turns))]
	select {
	case turn <- struct{}{}:
		defer func() { <-turn }()
	case <-callCtx.Done():
		return fmt.Errorf("cluster: budget update: waiting for the key: %w", callCtx.Err())
	}
	old := s.cache.get(key)
	for range maxSwaps {
		var st budget.State
		if old != "" {
			if err := json.Unmarshal([]byte(old), &st); err != nil {
				st = budget.State{} // not ours to read: start over
			}
		}
		fn(&st)
		val, ttl := "", int64(0)
		if st.Expires > st.Updated {
			b, err := json.Marshal(st)
			if err != nil {
				return err
			}
			val = string(b)
			// Its clock's microseconds to Redis's milliseconds, and a
			// second for the clocks to disagree.
			ttl = (st.Expires-st.Updated)/1000 + 1000
		}
		res, err := swapScript.Run(callCtx, s.conn.Client(), []string{rkey}, old, val, ttl).Slice()
		if err != nil {
			if ctx.Err() == nil {
				s.conn.Failed(err)
			}
			return fmt.Errorf("cluster: budget update: %w", err)
		}
		if len(res) > 0 && res[0] == int64(1) {
			s.cache.put(key, val, st.Expires)
			return nil
		}
		if len(res) < 2 {
			return fmt.Errorf("cluster: budget update: unexpected answer %v", res)
		}
		cur, _ := res[1].(string)
		old = cur
	}
	return errContended
}

// seenStates are the States this replica saw last in Redis, by the
// limiter's key: what an update expects to find. A stale one costs a
// round trip, never a wrong answer, so entries are dropped freely: those
// of full buckets in sweeps, as MemoryStore does, and all of them should
// the tenants ever outgrow maxSeen.
type seenStates struct {
	mu      sync.Mutex
	states  map[string]seen
	updates int
}

type seen struct {
	val     string
	expires int64 // Unix microseconds
}

const maxSeen = 1 << 16

func (c *seenStates) get(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[key].val
}

func (c *seenStates) put(key, val string, expires int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if val == "" {
		delete(c.states, key)
	} else {
		c.states[key] = seen{val, expires}
	}
	if c.updates++; c.updates >= max(1024, len(c.states)) {
		c.updates = 0
		now := time.Now().UnixMicro()
		for k, v := range c.states {
			if v.expires <= now {
				delete(c.states, k)
			}
		}
		if len(c.states) > maxSeen {
			clear(c.states)
		}
	}
}
