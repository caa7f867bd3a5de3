package budget

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// State is one bucket key's state: its tokens and requests meters.
type State struct {
	Tokens   Meter `json:"tokens"`
	Requests Meter `json:"requests"`
	// Updated is the time of the latest update, Unix microseconds.
	Updated int64 `json:"updated"`
	// Expires is when both buckets are full again at the limits of the
	// latest update: from then the state is the same as none, and a
	// store may drop it.
	Expires int64 `json:"expires"`
}

// Store keeps the States of buckets.
type Store interface {
	// Update calls fn with key's State (the zero State when there is
	// none) and keeps what fn leaves in it, atomically with respect to
	// every other Update of key. A store that retries on conflict may
	// call fn more than once: fn depends only on the State it is given.
	// A store may drop a State whose Expires is not after its Updated.
	Update(ctx context.Context, key string, fn func(*State)) error
}

// MemoryStore keeps States in the process, in shards so that tenants do
// not contend for one lock. A State is dropped when an update leaves it
// expired, and the others in sweeps, one after as many updates as there
// are States: memory follows the tenants active within about a minute, at
// a constant cost per update.
type MemoryStore struct {
	seed    maphash.Seed
	shards  [32]memShard
	size    atomic.Int64
	updates atomic.Int64
}

type memShard struct {
	mu     sync.Mutex
	states map[string]State
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	s := &MemoryStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].states = map[string]State{}
	}
	return s
}

// Update implements Store.
func (s *MemoryStore) Update(_ context.Context, key string, fn func(*State)) error {
	sh := &s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))]
	sh.mu.Lock()
	st, had := sh.states[key]
	fn(&st)
	switch {
	case st.Expires > st.Updated:
		sh.states[key] = st
		if !had {
			s.size.Add(1)
		}
	case had:
		delete(sh.states, key)
		s.size.Add(-1)
	}
	sh.mu.Unlock()
	if n := s.updates.Add(1); n >= max(1024, s.size.Load()) && s.updates.CompareAndSwap(n, 0) {
		s.sweep(st.Updated)
	}
	return nil
}

// sweep drops the States expired at now.
func (s *MemoryStore) sweep(now int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, v := range sh.states {
			if v.Expires <= now {
				delete(sh.states, k)
				s.size.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
}

// Len returns the number of States kept.
func (s *MemoryStore) Len() int { return int(s.size.Load()) }
