package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's "added_tokens": a token
// matched in the text before the model runs (special tokens such as
// "<|im_start|>", and any tokens added after training).
type addedToken struct {
	id         int
	content    string
	special    bool
	lstrip     bool // swallow white space on the left
	rstrip     bool // swallow white space on the right
	singleWord bool // match only between word boundaries
	normalized bool // match in normalized rather than raw text
}

// addedVocab finds added tokens in text, as the reference's
// AddedVocabulary::extract_and_normalize does: tokens with
// normalized=false are searched for in the raw input first; the text
// between them is normalized and then searched for tokens with
// normalized=true (whose contents were normalized the same way).
type addedVocab struct {
	tokens []addedToken
	raw    *trie // normalized == false
	norm   *trie // normalized == true, contents normalized
}

func newAddedVocab(tokens []addedToken, n normalizer) *addedVocab {
	v := &addedVocab{tokens: tokens, raw: newTrie(), norm: newTrie()}
	for i, t := range tokens {
		if t.content == "" {
			continue
		}
		if t.normalized {
			c := t.content
			if n != nil {
				c = n.normalize(c)
			}
			v.norm.insert(c, i)
		} else {
			v.raw.insert(t.content, i)
		}
	}
	return v
}

// span is a part of a text: an added token (tok >= 0, an index into
// addedVocab.tokens) or plain text (tok < 0).
type span struct {
	start, end int
	tok        int
}

// split cuts text into added tokens and normalized pieces of text.
// emit is called in order with either a token index (text ignored) or
// a piece of normalized text.
func (v *addedVocab) split(text string, n normalizer, emit func(tok int, p piece)) {
	for _, s := range v.find(text, v.raw) {
		if s.tok >= 0 {
			emit(s.tok, piece{})
			continue
		}
		sub := text[s.start:s.end]
		if n != nil {
			sub = n.normalize(sub)
		}
		atStart := s.start == 0
		for _, t := range v.find(sub, v.norm) {
			if t.tok >= 0 {
				emit(t.tok, piece{})
				continue
			}
			emit(-1, piece{text: sub[t.start:t.end], atStart: atStart && t.start == 0})
		}
	}
}

// find is the reference's AddedVocabulary::find_matches: leftmost-longest
// non-overlapping matches, honouring single_word, lstrip and rstrip.
// Empty text yields no spans.
func (v *addedVocab) find(s string, t *trie) []span {
	if s == "" {
		return nil
	}
	var out []span
	if t.empty() {
		return append(out, span{0, len(s), -1})
	}
	last := 0 // end of the previous emitted span
	for i := 0; i < len(s); {
		if !t.first[s[i]] {
			i++
			continue
		}
		tok, n := t.longest(s[i:])
		if tok < 0 {
			i++
			continue
		}
		start, stop := i, i+n
		i = stop
		at := v.tokens[tok]
		if at.singleWord {
			if (start > 0 && endsWithWord(s[:start])) || (stop < len(s) && startsWithWord(s[stop:])) {
				continue
			}
		}
		if at.lstrip {
			ns := start
			for ns > 0 {
				r, size := utf8.DecodeLastRuneInString(s[:ns])
				if !unicode.IsSpace(r) {
					break
				}
				ns -= size
			}
			start = max(ns, last)
		}
		if at.rstrip {
			for stop < len(s) {
				r, size := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += size
			}
			i = stop
		}
		if last < start {
			out = append(out, span{last, start, -1})
		}
		out = append(out, span{start, stop, tok})
		last = stop
	}
	if last < len(s) {
		out = append(out, span{last, len(s), -1})
	}
	return out
}

// endsWithWord and startsWithWord are the reference's \w$ and ^\w.
func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}

// trie is a byte trie of token contents.
type trie struct {
	next  map[byte]*trie
	tok   int        // index of the token ending here, or -1
	first *[256]bool // at the root: the bytes tokens start with
}

func newTrie() *trie { return &trie{tok: -1} }

func (t *trie) empty() bool { return len(t.next) == 0 }

func (t *trie) insert(s string, tok int) {
	if t.first == nil {
		t.first = new([256]bool)
	}
	if s != "" {
		t.first[s[0]] = true
	}
	n := t
	for i := 0; i < len(s); i++ {
		c, ok := n.next[s[i]]
		if !ok {
			if n.next == nil {
				n.next = make(map[byte]*trie)
			}
			c = newTrie()
			n.next[s[i]] = c
		}
		n = c
	}
	if n.tok < 0 {
		n.tok = tok
	}
}

// longest returns the token that is the longest prefix of s and its
// length, or -1.
func (t *trie) longest(s string) (tok, n int) {
	tok = -1
	cur := t
	for i := 0; i < len(s); i++ {
		c, ok := cur.next[s[i]]
		if !ok {
			break
		}
		cur = c
		if cur.tok >= 0 {
			tok, n = cur.tok, i+1
		}
	}
	return tok, n
}
