// Package jsongrammar constrains generated text to JSON: any JSON object
// (OpenAI's json_object mode) or the values of a JSON schema.
//
// A schema compiles (CompileSchema) into a Grammar: a graph of nodes
// (objects, arrays, strings, numbers, literals, alternatives) that a
// byte-level pushdown automaton walks. A State of the automaton is the set
// of stacks of the parses still possible after the bytes fed so far
// (alternatives make it a set); states are interned per Automaton, so the
// transition of a state on a byte is computed once, and the token mask of
// a state (the tokens of a vocabulary whose bytes may come next) is
// computed once too, by a walk of the vocabulary's byte trie that follows
// the cached transitions, pruning every branch the grammar refuses. A
// sequence then pays, per token, a map-free pointer walk over the token's
// bytes and, for a state seen before, nothing to get its mask.
//
// Supported keywords: type (one or a list), properties, required,
// additionalProperties (false, true, or a schema for an object without
// properties), items, prefixItems is not, minItems, maxItems, enum,
// const, anyOf, oneOf (as anyOf), allOf of one schema, $ref to
// #/$defs/... or #/definitions/... (recursion allowed, bounded by the
// depth limit), and pattern for simple classes: a sequence of literal
// characters, classes ([a-z0-9_], \d, \w, \s, .) with quantifiers (*, +,
// ?, {n}, {n,m}), anchored with ^ and $. Annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly, strict) are ignored. Any other keyword is an error
// that names it (SchemaError).
//
// Generated JSON is compact: no whitespace between tokens, properties in
// the schema's order (required ones always, optional ones maybe), no
// property that the schema does not declare unless the object has no
// declared properties. Numbers have at most MaxDigits digits per part, so
// a generation cannot spend its budget on one number.
//
// There is no well-kept pure-Go library for token-level decoding
// constrained by a JSON schema (xgrammar, llguidance and Outlines are
// C++, Rust and Python), so this package is written here.
package jsongrammar
