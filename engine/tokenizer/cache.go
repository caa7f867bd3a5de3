package tokenizer

import (
	"strings"
	"sync"
)

// wordCache maps words to their ids. It is safe for concurrent use:
// it is split into shards, each a map behind a read-write lock (a
// sync.Map was measured slower for these short string keys). A shard
// is emptied when it reaches its share of maxCacheEntries, which
// bounds memory while keeping the hot vocabulary of a workload cached.
type wordCache struct {
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int
	_  [32]byte // keep shards on separate cache lines
}

const (
	cacheShards     = 16
	maxCacheEntries = 1 << 16
)

func (c *wordCache) shard(w string) *cacheShard {
	return &c.shards[(uint(len(w))*31+uint(w[0])+uint(w[len(w)-1])*7)%cacheShards]
}

func (c *wordCache) get(w string) ([]int, bool) {
	s := c.shard(w)
	s.mu.RLock()
	ids, ok := s.m[w]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int) {
	s := c.shard(w)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= maxCacheEntries/cacheShards {
		s.m = make(map[string][]int)
	}
	// Clone: w may be a slice of a long prompt that should not be kept.
	s.m[strings.Clone(w)] = ids
	s.mu.Unlock()
}
