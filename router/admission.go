package router

import (
	"runtime"
)

// Admission is what a request costs the router before any engine is
// asked: reading, decoding and tokenizing its body. A few large bodies
// (a 3 MB prompt takes about a second to tokenize) must not starve the
// streams, the health probes and the engines of the CPU, so bodies over
// largeBody are decoded and tokenized a few at a time (largeSlots), and a
// prompt that overflows the context is refused from a prefix of it.

// largeBody is the body size from which a request takes a large slot:
// a body below it decodes and tokenizes in well under a millisecond.
const largeBody = 64 << 10

// largeSlots bounds the large requests prepared at once: half the CPUs,
// at least one, so that the rest keep serving.
var largeSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// probeBytesPerToken sizes the prefix of a long prompt that is tokenized
// first: context tokens times this many bytes. Text averages about four
// bytes a token; a prompt whose prefix already holds more tokens than the
// context is refused without tokenizing the rest.
const probeBytesPerToken = 8
