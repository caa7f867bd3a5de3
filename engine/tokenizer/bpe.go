package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// The BPE model is hand-written. github.com/sugarme/tokenizer (v0.3.0)
// has one, but loading Llama-3's tokenizer.json with it panics (Go's
// regexp cannot compile the split pattern's look-ahead), its BPE knows
// neither ignore_merges nor byte fallback, and its pieces are not
// usable on their own; gomlx/go-huggingface implements SentencePiece
// only. What is left to write is small: the merge loop below, which
// follows the reference's Word::merge_all
// (tokenizers/src/models/bpe/word.rs) step by step so that ties and
// stale queue entries resolve the same way.

// bpe is a byte-pair-encoding model.
type bpe struct {
	vocab        map[string]int
	merges       map[uint64]merge // key: pairKey(left, right)
	unkID        int              // -1 when there is no unk_token
	prefix       string           // continuing_subword_prefix
	suffix       string           // end_of_word_suffix
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	byteIDs      [256]int // ids of "<0x00>".."<0xFF>", -1 if absent
	// runeIDs[r] is the id of the one-rune token r (-1 if none), for
	// the runes byte-level models spell every word with; valid only
	// when there is no prefix or suffix (runeTable).
	runeIDs   [runeTableSize]int32
	runeTable bool

	cache    wordCache // keyed by word
	rawCache wordCache // keyed by word before the byte-level mapping
}

// merge is the rank of a pair's merge and the id it produces.
type merge struct {
	rank  int32
	newID int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// newBPE builds the model from its JSON description.
func newBPE(m *bpeJSON) (*bpe, error) {
	if m.Type != "" && m.Type != "BPE" {
		return nil, fmt.Errorf("model %q: %w", m.Type, errUnsupported)
	}
	vocab, err := parseVocab(m.Vocab)
	if err != nil {
		return nil, err
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	b := &bpe{
		vocab:        vocab,
		merges:       make(map[uint64]merge, len(merges)),
		unkID:        -1,
		fuseUnk:      m.FuseUnk,
		byteFallback: m.ByteFallback,
		ignoreMerges: m.IgnoreMerges,
		prefix:       valueOr(m.ContinuingSubwordPrefix, ""),
		suffix:       valueOr(m.EndOfWordSuffix, ""),
	}
	if m.UnkToken != nil {
		id, ok := b.vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		b.unkID = id
	}
	b.runeTable = b.prefix == "" && b.suffix == ""
	for r := range b.runeIDs {
		b.runeIDs[r] = -1
		if id, ok := b.vocab[string(rune(r))]; ok {
			b.runeIDs[r] = int32(id)
		}
	}
	for i := range b.byteIDs {
		b.byteIDs[i] = -1
		if id, ok := b.vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
			b.byteIDs[i] = id
		}
	}
	for rank, p := range merges {
		a, okA := b.vocab[p[0]]
		c, okC := b.vocab[p[1]]
		right := p[1]
		if b.prefix != "" && len(right) >= len(b.prefix) && right[:len(b.prefix)] == b.prefix {
			right = right[len(b.prefix):]
		}
		n, okN := b.vocab[p[0]+right]
		if !okA || !okC || !okN {
			return nil, fmt.Errorf("merge %d (%q %q): token not in the vocabulary", rank, p[0], p[1])
		}
		// A repeated pair keeps its last rank, as in the reference.
		b.merges[pairKey(int32(a), int32(c))] = merge{int32(rank), int32(n)}
	}
	return b, nil
}

// runeTableSize covers the code points of the byte-level alphabet
// (U+0021..U+0143).
const runeTableSize = 0x180

// maxCachedWord is the longest word (in bytes) whose encoding is cached.
const maxCachedWord = 256

// encode appends the ids of one pre-tokenized word to dst.
func (b *bpe) encode(dst []int, word string) []int {
	if word == "" {
		return dst
	}
	if b.ignoreMerges {
		if id, ok := b.vocab[word]; ok {
			return append(dst, id)
		}
	}
	if len(word) <= maxCachedWord {
		if ids, ok := b.cache.get(word); ok {
			return append(dst, ids...)
		}
	}
	n := len(dst)
	dst = b.mergeWord(dst, word)
	if len(word) <= maxCachedWord {
		b.cache.put(word, append([]int(nil), dst[n:]...))
	}
	return dst
}

// encodeRaw is encode for a word that still needs the byte-level
// mapping; its cache is keyed by the unmapped word, so cache hits skip
// the mapping.
func (b *bpe) encodeRaw(dst []int, raw string) []int {
	if raw == "" {
		return dst
	}
	if len(raw) <= maxCachedWord {
		if ids, ok := b.rawCache.get(raw); ok {
			return append(dst, ids...)
		}
	}
	n := len(dst)
	dst = b.encode(dst, byteLevelEncode(raw))
	if len(raw) <= maxCachedWord {
		b.rawCache.put(raw, append([]int(nil), dst[n:]...))
	}
	return dst
}

// symbol is one node of the doubly linked list a word is merged in.
// size is the byte length it covers; 0 marks a symbol merged away.
type symbol struct {
	id         int32
	prev, next int32
	size       int32
}

// mergeWord splits word into characters, maps them to ids (with
// prefix/suffix, byte fallback and unknown handling), applies the merges
// and appends the resulting ids to dst.
func (b *bpe) mergeWord(dst []int, w string) []int {
	var stack [64]symbol
	syms := stack[:0]
	add := func(id, size int) {
		syms = append(syms, symbol{id: int32(id), prev: int32(len(syms) - 1), next: int32(len(syms) + 1), size: int32(size)})
	}
	unkID, unkLen := -1, 0
	for i := 0; i < len(w); {
		r, size := rune(w[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(w[i:])
		}
		if b.runeTable && r < runeTableSize && b.runeIDs[r] >= 0 {
			if unkID >= 0 {
				add(unkID, unkLen)
				unkID = -1
			}
			add(int(b.runeIDs[r]), size)
			i += size
			continue
		}
		s := w[i : i+size]
		if i > 0 && b.prefix != "" {
			s = b.prefix + s
		}
		if i+size == len(w) && b.suffix != "" {
			s += b.suffix
		}
		i += size
		if id, ok := b.vocab[s]; ok {
			if unkID >= 0 {
				add(unkID, unkLen)
				unkID = -1
			}
			add(id, size)
			continue
		}
		if b.byteFallback && b.hasBytes(s) {
			for j := 0; j < len(s); j++ {
				add(b.byteIDs[s[j]], 1)
			}
			continue
		}
		if b.unkID >= 0 {
			switch {
			case unkID >= 0 && b.fuseUnk:
				unkLen += size
			case unkID >= 0:
				add(unkID, unkLen)
				unkLen = size
			default:
				unkID, unkLen = b.unkID, size
			}
		}
	}
	if unkID >= 0 {
		add(unkID, unkLen)
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1

	// The queue holds candidate merges, lowest rank first and, among
	// equal ranks, leftmost first. Entries made stale by earlier merges
	// are detected and skipped when popped.
	var qbuf [64]queued
	q := mergeQueue(qbuf[:0])
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := b.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q.push(queued{m.rank, int32(i), m.newID})
		}
	}
	for len(q) > 0 {
		top := q.pop()
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next < 0 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if m, ok := b.merges[pairKey(cur.id, right.id)]; !ok || m.newID != top.newID {
			continue
		}
		cur.id = top.newID
		cur.size += right.size
		cur.next = right.next
		syms[nextPos].size = 0
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if m, ok := b.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				q.push(queued{m.rank, cur.prev, m.newID})
			}
		}
		if cur.next >= 0 {
			if m, ok := b.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				q.push(queued{m.rank, top.pos, m.newID})
			}
		}
	}
	for i := 0; i >= 0 && i < len(syms); i = int(syms[i].next) {
		dst = append(dst, int(syms[i].id))
	}
	return dst
}

// hasBytes reports whether every byte of s has a "<0xXX>" token.
func (b *bpe) hasBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if b.byteIDs[s[i]] < 0 {
			return false
		}
	}
	return true
}

// queued is a candidate merge of the symbol at pos with its successor.
type queued struct {
	rank  int32
	pos   int32
	newID int32
}

func (a queued) less(b queued) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeQueue is a binary min-heap of candidate merges.
type mergeQueue []queued

func (h *mergeQueue) push(x queued) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeQueue) pop() queued {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[m]) {
			m = l
		}
		if r < len(s) && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
