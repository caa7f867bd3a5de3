package tokenizer

import (
	"encoding/json"
	"fmt"
)

// The types in this file mirror the subset of the Hugging Face
// tokenizers serialization format ("tokenizer.json") that this package
// understands. Components are decoded in two steps: first into
// componentJSON to read the "type" tag, then into the concrete shape.

// fileJSON is the top level of tokenizer.json.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         json.RawMessage  `json:"model"`
}

// addedTokenJSON is one entry of "added_tokens".
type addedTokenJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// patternJSON is a Split/Replace pattern: exactly one of String or Regex.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// componentJSON holds every field used by any normalizer, pre-tokenizer,
// decoder or post-processor. Unused fields stay zero.
type componentJSON struct {
	Type string `json:"type"`

	// Sequence members.
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`

	// Replace, Split, Prepend, Strip.
	Pattern  *patternJSON    `json:"pattern"`
	Content  json.RawMessage `json:"content"`
	Prepend  string          `json:"prepend"`
	Behavior string          `json:"behavior"`
	Invert   bool            `json:"invert"`
	Left     bool            `json:"strip_left"`
	Right    bool            `json:"strip_right"`
	Start    int             `json:"start"`
	Stop     int             `json:"stop"`

	// ByteLevel, Metaspace, Digits.
	AddPrefixSpace   *bool   `json:"add_prefix_space"`
	UseRegex         *bool   `json:"use_regex"`
	Replacement      string  `json:"replacement"`
	PrependScheme    string  `json:"prepend_scheme"`
	Split            *bool   `json:"split"`
	IndividualDigits bool    `json:"individual_digits"`
	Suffix           *string `json:"suffix"`

	// TemplateProcessing.
	Single        []templatePieceJSON            `json:"single"`
	SpecialTokens map[string]templateSpecialJSON `json:"special_tokens"`
	Sep           json.RawMessage                `json:"sep"`
	Cls           json.RawMessage                `json:"cls"`
}

// templatePieceJSON is one element of TemplateProcessing.single.
type templatePieceJSON struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// templateSpecialJSON is one value of TemplateProcessing.special_tokens.
type templateSpecialJSON struct {
	ID  string `json:"id"`
	IDs []int  `json:"ids"`
}

// bpeJSON is the "model" object of a BPE tokenizer.
type bpeJSON struct {
	Type                    string          `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
}

// parseVocab decodes the model's {"token": id} vocabulary.
func parseVocab(raw json.RawMessage) (map[string]int, error) {
	if v, err := scanVocab(raw); err == nil {
		return v, nil
	}
	var v map[string]int
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("vocab: %w", err)
	}
	return v, nil
}

// isNull reports whether raw is absent or the JSON literal null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// valueOr returns *p, or def when the optional field p is absent.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// decodeComponent parses one component object.
func decodeComponent(raw json.RawMessage) (*componentJSON, error) {
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if c.Type == "" {
		return nil, fmt.Errorf("component without a type: %.80s", raw)
	}
	return &c, nil
}

// contentString returns the "content" field when it is a JSON string
// (Replace.content, Strip.content); ok is false otherwise.
func (c *componentJSON) contentString() (string, bool) {
	var s string
	if isNull(c.Content) || json.Unmarshal(c.Content, &s) != nil {
		return "", false
	}
	return s, true
}

// parseMerges accepts both merge encodings: "a b" strings (tokenizers
// < 0.20) and ["a", "b"] pairs (tokenizers >= 0.20).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	if out, err := scanMerges(raw); err == nil {
		return out, nil
	}
	return parseMergesSlow(raw)
}

// parseMergesSlow is parseMerges with encoding/json only.
func parseMergesSlow(raw json.RawMessage) ([][2]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	out := make([][2]string, 0, len(items))
	for i, it := range items {
		if len(it) > 0 && it[0] == '"' {
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return nil, fmt.Errorf("merge %d: %w", i, err)
			}
			a, b, ok := cutSpace(s)
			if !ok {
				return nil, fmt.Errorf("merge %d: %q is not two tokens", i, s)
			}
			out = append(out, [2]string{a, b})
			continue
		}
		var pair []string
		if err := json.Unmarshal(it, &pair); err != nil {
			return nil, fmt.Errorf("merge %d: %w", i, err)
		}
		if len(pair) != 2 {
			return nil, fmt.Errorf("merge %d: want 2 tokens, got %d", i, len(pair))
		}
		out = append(out, [2]string{pair[0], pair[1]})
	}
	return out, nil
}

// cutSpace splits a legacy "a b" merge at its first space, as the
// reference implementation does.
func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}
