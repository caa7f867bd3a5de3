// Package kvcache is the built-in engine's paged KV cache: a fixed pool of
// pages of PageSize token slots, a reference-counting page allocator, and a
// radix prefix cache that keeps full pages of finished sequences for reuse
// and evicts them least recently used when the allocator runs dry.
//
// A KV slot is page*PageSize + offset, as in MLC's kv_append_metadata. The
// pool is not safe for concurrent use: the engine's scheduler goroutine
// owns it.
package kvcache
