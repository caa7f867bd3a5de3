// Package tokenizer encodes text to token ids and back exactly as a
// model's Hugging Face tokenizer ("tokenizer.json") does.
//
// It implements the parts of the Hugging Face tokenizers pipeline that
// decoder-only LLMs use: added and special tokens, normalizers (NFC and
// friends, Prepend, Replace, ...), pre-tokenizers (regex Split,
// ByteLevel, Metaspace, ...), the BPE model (byte-level, or
// SentencePiece-style with byte fallback), post-processors for
// EncodeSpecial, and decoders. Unsupported components (Unigram and
// WordPiece models, BERT and Precompiled normalizers, ...) make Load and
// FromJSON fail rather than tokenize differently.
//
// The tests check it against two implementations fetched from npm:
// @lenml/tokenizers (a fork of transformers.js) and
// @mlc-ai/web-tokenizers (MLC's tokenizers-cpp, which wraps the Rust
// tokenizers library, compiled to WebAssembly). The Llama-3 and Qwen3
// tokenizers, a hand-made SentencePiece-style one and a dozen rewired
// pipelines give the same ids and text on a corpus of 2,500 strings
// of mixed scripts, code, emoji, white space, control characters and
// special-token look-alikes.
//
// Known differences from the Rust implementation: text is taken as
// UTF-8 with each invalid byte read as U+FFFD; regular-expression
// classes follow Rust's regex crate (as in the WebAssembly build) where
// native builds use Oniguruma, which may differ in corners such as
// case-insensitive 'ſ matching 's; BPE dropout is ignored; offsets and
// pairs of sequences are not supported.
//
// A *HF is safe for concurrent use.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and back.
type Tokenizer interface {
	// Encode returns the ids of text alone: special tokens written in
	// the text are recognized, but none are added (no BOS), as
	// tokenizers-cpp's Encode and MLC do for completion prompts.
	Encode(text string) []int
	// Decode returns the text of ids, skipping nothing: special tokens
	// are rendered as their content. Unknown ids are ignored.
	Decode(ids []int) string
	// VocabSize returns one more than the largest token id, added
	// tokens included.
	VocabSize() int
}

// HF is a tokenizer loaded from a Hugging Face tokenizer.json.
type HF struct {
	normalizer normalizer
	pre        preTokenizer
	model      *bpe
	post       postProcessor
	decoder    decoder
	added      *addedVocab

	idToToken []string       // "" for ids with no token
	special   []bool         // indexed by id
	addedIDs  map[string]int // content of added tokens to id

	bos int // -1 if unknown
	eos []int

	table tokenTable
}

var _ Tokenizer = (*HF)(nil)

// Load reads dir/tokenizer.json and, when present,
// dir/tokenizer_config.json (for the BOS and EOS tokens) and
// dir/generation_config.json (for further EOS ids, such as Llama-3
// Instruct's <|eot_id|>).
func Load(dir string) (*HF, error) {
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, err
	}
	// In this order: generation_config.json adds to the EOS ids that
	// tokenizer_config.json sets.
	if err := applyIfPresent(filepath.Join(dir, "tokenizer_config.json"), t.applyConfig); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if err := applyIfPresent(filepath.Join(dir, "generation_config.json"), t.applyGenerationConfig); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

// applyIfPresent applies the file at path, if there is one.
func applyIfPresent(path string, apply func([]byte) error) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := apply(b); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json.
// Without a tokenizer_config.json it knows no BOS or EOS token beyond
// what the post-processor adds.
func FromJSON(tokenizerJSON []byte) (*HF, error) {
	t, err := fromJSON(tokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

func fromJSON(data []byte) (*HF, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if isNull(f.Model) {
		return nil, errors.New("no model")
	}
	var m bpeJSON
	if err := json.Unmarshal(f.Model, &m); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if m.Type != "" && m.Type != "BPE" {
		return nil, fmt.Errorf("model %q: %w", m.Type, errUnsupported)
	}
	if m.Type == "" && m.Merges == nil {
		return nil, fmt.Errorf("model without type or merges: %w", errUnsupported)
	}
	t := &HF{bos: -1, addedIDs: make(map[string]int)}
	var err error
	if t.model, err = newBPE(&m); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if t.normalizer, err = normalizerKind.fromJSON(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = preTokenizerKind.fromJSON(f.PreTokenizer); err != nil {
		return nil, err
	}
	last := t.pre
	if seq, ok := last.(preTokenizerSeq); ok && len(seq) > 0 {
		last = seq[len(seq)-1]
	}
	if bl, ok := last.(*byteLevelPre); ok {
		bl.deferMap = true
	}
	if t.post, err = postProcessorKind.fromJSON(f.PostProcessor); err != nil {
		return nil, err
	}
	if t.decoder, err = decoderKind.fromJSON(f.Decoder); err != nil {
		return nil, err
	}

	size := 0
	for _, id := range t.model.vocab {
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		size = max(size, a.ID+1)
	}
	t.idToToken = make([]string, size)
	t.special = make([]bool, size)
	for tok, id := range t.model.vocab {
		if id < 0 {
			return nil, fmt.Errorf("model: negative id %d for %q", id, tok)
		}
		t.idToToken[id] = tok
	}
	tokens := make([]addedToken, 0, len(f.AddedTokens))
	for _, a := range f.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("added token %q: negative id %d", a.Content, a.ID)
		}
		t.idToToken[a.ID] = a.Content
		t.special[a.ID] = a.Special
		t.addedIDs[a.Content] = a.ID
		tokens = append(tokens, addedToken{
			id:         a.ID,
			content:    a.Content,
			special:    a.Special,
			lstrip:     a.LStrip,
			rstrip:     a.RStrip,
			singleWord: a.SingleWord,
			normalized: a.Normalized,
		})
	}
	t.added = newAddedVocab(tokens, t.normalizer)
	return t, nil
}

// Encode returns the ids of text with no special tokens added. See
// Tokenizer.Encode.
func (t *HF) Encode(text string) []int { return t.EncodeSpecial(text, false) }

// EncodeSpecial encodes text and, when addSpecial is true, lets the
// post-processor add the model's special tokens (for instance
// Llama-3's <|begin_of_text|>), as the reference's
// encode(text, add_special_tokens) does. Special tokens written in text
// are recognized either way. Invalid UTF-8 bytes are read as U+FFFD, one
// per byte.
func (t *HF) EncodeSpecial(text string, addSpecial bool) []int {
	if !utf8.ValidString(text) {
		text = validUTF8(text)
	}
	ids := make([]int, 0, len(text)/3+4)
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	var buf [1]piece
	t.added.split(text, t.normalizer, func(tok int, p piece) {
		if tok >= 0 {
			ids = append(ids, t.added.tokens[tok].id)
			return
		}
		buf[0] = p
		pieces := buf[:]
		if t.pre != nil {
			sc.pieces[0] = t.pre.preTokenize(sc, sc.pieces[0][:0], pieces)
			pieces = sc.pieces[0]
		}
		for _, q := range pieces {
			if q.raw {
				ids = t.model.encodeRaw(ids, q.text)
			} else {
				ids = t.model.encode(ids, q.text)
			}
		}
	})
	if addSpecial && t.post != nil {
		ids = t.post.process(ids)
	}
	return ids
}

// Decode returns the text of ids. See Tokenizer.Decode.
func (t *HF) Decode(ids []int) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if tok, ok := t.IDToken(id); ok {
			tokens = append(tokens, tok)
		}
	}
	if t.decoder == nil {
		return strings.Join(tokens, " ")
	}
	return strings.Join(t.decoder.decodeChain(tokens), "")
}

// VocabSize returns one more than the largest token id.
func (t *HF) VocabSize() int { return len(t.idToToken) }

// TokenID returns the id of a token given as it appears in the
// vocabulary (for byte-level models, in its byte-level spelling, such as
// "Ġthe") or as an added token's content.
func (t *HF) TokenID(tok string) (int, bool) {
	if id, ok := t.addedIDs[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// IDToken returns the vocabulary entry or added-token content of id.
func (t *HF) IDToken(id int) (string, bool) {
	if id < 0 || id >= len(t.idToToken) {
		return "", false
	}
	tok := t.idToToken[id]
	return tok, tok != ""
}

// IsSpecial reports whether id is an added token marked special.
func (t *HF) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}
