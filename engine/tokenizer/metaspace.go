package tokenizer

import (
	"fmt"
	"strings"
)

// metaspace is the SentencePiece-style pre-tokenizer: spaces become the
// replacement character (normally "▁"), which is prepended according to
// the prepend scheme, and the text is split before each of them.
type metaspace struct {
	replacement string
	scheme      string // "always", "first" or "never"
	split       bool
	sp          *splitter // before each replacement character
}

func newMetaspace(c *componentJSON) (*metaspace, error) {
	m := &metaspace{replacement: c.Replacement, split: valueOr(c.Split, true)}
	if m.replacement == "" {
		m.replacement = "▁"
	}
	switch c.PrependScheme {
	case "always", "first", "never":
		m.scheme = c.PrependScheme
	case "":
		// Serializations before tokenizers 0.14 have add_prefix_space.
		m.scheme = "never"
		if valueOr(c.AddPrefixSpace, true) {
			m.scheme = "always"
		}
	default:
		return nil, fmt.Errorf("metaspace prepend_scheme %q: %w", c.PrependScheme, errUnsupported)
	}
	lit := &pattern{literal: m.replacement}
	m.sp = &splitter{find: lit.findAll, behavior: mergedWithNext}
	return m, nil
}

func (m *metaspace) preTokenize(sc *scratch, out, ps []piece) []piece {
	for _, p := range ps {
		p.text = strings.ReplaceAll(p.text, " ", m.replacement)
		if !strings.HasPrefix(p.text, m.replacement) &&
			(m.scheme == "always" || (m.scheme == "first" && p.atStart)) {
			p.text = m.replacement + p.text
		}
		if !m.split {
			if p.text != "" {
				out = append(out, p)
			}
			continue
		}
		out = m.sp.split(sc, out, p)
	}
	return out
}
