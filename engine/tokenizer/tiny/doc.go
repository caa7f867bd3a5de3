// Package tiny is the embedded word-level tokenizer of the built-in engine's
// "tiny" model.
//
// The vocabulary is, in id order: the special tokens BOS and EOS, one token
// per byte (the fallback that lets any string encode), single-character
// symbols (punctuation, digits, newline), and about a thousand common
// English words, each with a leading space (" the").
//
// Encoding splits the text into pieces: a space followed by a run of ASCII
// letters, a symbol, or any other byte. A piece in the vocabulary becomes its
// token, any other piece becomes its bytes. Decoding concatenates the token
// strings (special tokens decode to nothing), so Decode(Encode(s)) == s for
// every string s, valid UTF-8 or not.
//
// The tokenizer is canonical on what the model generates: the model only
// samples symbols, words and EOS (see [Tokenizer.Generatable]), and for any
// sequence ids of those, Encode(Decode(ids)) equals ids; moreover
// Encode(p + Decode(ids)) equals Encode(p) followed by ids for any prefix
// text p. A router can therefore resume a preempted generation from the text
// it already delivered and stay exact.
package tiny
