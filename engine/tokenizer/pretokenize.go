package tokenizer

import (
	"encoding/json"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A piece is a span of normalized text on its way to the model.
// atStart reports whether it begins at offset 0 of the original input,
// which Metaspace's "first" prepend scheme needs.
type piece struct {
	text    string
	atStart bool
	raw     bool // text still awaits the byte-level mapping (see byteLevelPre.deferMap)
}

// A preTokenizer splits pieces into smaller pieces (and may rewrite
// them, as ByteLevel and Metaspace do). The model encodes each resulting
// piece on its own. preTokenize appends the pieces ps split into to dst
// (which must not alias ps) and may use sc for temporary storage.
type preTokenizer interface {
	preTokenize(sc *scratch, dst, ps []piece) []piece
}

// scratch holds buffers reused across calls to EncodeSpecial.
type scratch struct {
	pieces  [3][]piece
	matches [][2]int
	depth   int // nesting of preTokenizerSeq
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledPieces bounds the buffers a scratch keeps between calls:
// small enough that clearing them is cheap next to encoding, large
// enough for typical sections of text.
const maxPooledPieces = 256

// release returns sc to the pool, first dropping its references to the
// text just encoded (so that pooled buffers do not keep prompts alive)
// and any buffer grown unusually large.
func (sc *scratch) release() {
	for i, p := range sc.pieces {
		if cap(p) > maxPooledPieces {
			sc.pieces[i] = nil
		} else {
			clear(p[:cap(p)])
		}
	}
	if cap(sc.matches) > 2*maxPooledPieces {
		sc.matches = nil
	}
	scratchPool.Put(sc)
}

// gpt2Pattern is the split expression ByteLevel uses when use_regex is
// true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// preTokenizerKind reads tokenizer.json's "pre_tokenizer".
var preTokenizerKind = componentKind[preTokenizer]{
	name:    "pre_tokenizer",
	members: func(c *componentJSON) []json.RawMessage { return c.Pretokenizers },
	seq:     func(m []preTokenizer) preTokenizer { return preTokenizerSeq(m) },
	build:   buildPreTokenizer,
}

// buildPreTokenizer builds a pre-tokenizer of any type but Sequence.
func buildPreTokenizer(c *componentJSON) (preTokenizer, error) {
	switch c.Type {
	case "Split":
		p, err := compilePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		b, err := parseBehavior(c.Behavior)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		return &splitter{find: p.findAll, behavior: b, invert: c.Invert}, nil
	case "ByteLevel":
		bl := &byteLevelPre{addPrefixSpace: valueOr(c.AddPrefixSpace, true)}
		if valueOr(c.UseRegex, true) {
			p, err := compilePattern(&patternJSON{Regex: new(gpt2Pattern)})
			if err != nil {
				return nil, err
			}
			bl.split = &splitter{find: p.findAll, behavior: isolated}
		}
		return bl, nil
	case "Metaspace":
		return newMetaspace(c)
	case "Whitespace":
		// The reference's \w+|[^\w\s]+, with \w as Rust's regex
		// crate defines it (regexp2's .NET \w lacks spacing marks).
		return &splitter{find: findWordsAndPunct, behavior: removed, invert: true}, nil
	case "WhitespaceSplit":
		return &splitter{find: runeMatcher(unicode.IsSpace), behavior: removed}, nil
	case "Digits":
		b := contiguous
		if c.IndividualDigits {
			b = isolated
		}
		return &splitter{find: runeMatcher(unicode.IsNumber), behavior: b}, nil
	case "Punctuation":
		b := isolated
		if c.Behavior != "" {
			var err error
			if b, err = parseBehavior(c.Behavior); err != nil {
				return nil, fmt.Errorf("pre_tokenizer Punctuation: %w", err)
			}
		}
		return &splitter{find: runeMatcher(isPunctuation), behavior: b}, nil
	default:
		return nil, fmt.Errorf("pre_tokenizer %q: %w", c.Type, errUnsupported)
	}
}

// isPunctuation is Rust's char::is_ascii_punctuation || is_punctuation.
func isPunctuation(r rune) bool {
	return unicode.IsPunct(r) || (r < utf8.RuneSelf && unicode.IsSymbol(r))
}

// preTokenizerSeq applies its members in order.
type preTokenizerSeq []preTokenizer

func (q preTokenizerSeq) preTokenize(sc *scratch, dst, ps []piece) []piece {
	// Intermediate results ping-pong between two scratch buffers, or,
	// in a nested sequence, between fresh ones.
	var bufs [2][]piece
	if sc.depth == 0 {
		bufs = [2][]piece{sc.pieces[1], sc.pieces[2]}
	}
	sc.depth++
	defer func() { sc.depth-- }()
	for i, p := range q {
		if i == len(q)-1 {
			if sc.depth == 1 {
				sc.pieces[1], sc.pieces[2] = bufs[0], bufs[1]
			}
			return p.preTokenize(sc, dst, ps)
		}
		out := p.preTokenize(sc, bufs[i%2][:0], ps)
		bufs[i%2] = out
		ps = out
	}
	return append(dst, ps...)
}
