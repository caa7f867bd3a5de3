// Package jsongrammar constrains generated text to JSON: any JSON object
// (OpenAI's json_object mode) or the values of a JSON schema.
//
// A schema compiles (CompileSchema) into a Grammar: a graph of nodes
// (objects, arrays, strings, numbers, literals, alternatives) that a
// byte-level pushdown automaton walks. The compiler reads the schema as
// conjunctions (a schema with its allOf, its $ref targets and the
// alternative of an anyOf chosen), each compiled once and keyed by what
// constrains in it, so that a schema reached through many references or
// alternatives is one node; a conjunction merges its parts' keywords.
// Strings compile to automata over their characters (patterns and
// formats through regexp/syntax, then a subset construction; lengths as
// tables of the lengths each state can still reach), numbers to automata
// over their bytes (bounds compared digit by digit, multiples as
// remainders). not, if/then/else, dependentSchemas and overlapping oneOf
// are read through negation (negate.go). Annotations and unknown
// keywords pass; a part that cannot be served where the value does not
// need it is left out, never written. What no automaton can hold (array
// items under uniqueItems past a small set, object keys) a Distinct
// keeps apart beside the automaton. CheckXGrammar checks a schema as
// MLC's engines' grammar engine (xgrammar) reads it instead.
//
// A State of the automaton is a graph-structured stack: the parses still
// possible after the bytes fed so far, those at the same place sharing
// one node over the union of their parents. States are interned per
// Automaton, so the transition of a state on a byte is computed once,
// and the token mask of a state (the tokens of a vocabulary whose bytes
// may come next) is computed once too, by a walk of the vocabulary's
// byte trie that follows the cached transitions, pruning every branch
// the grammar refuses. A sequence then pays, per token, a pointer walk
// over the token's bytes and, for a state seen before, nothing to get
// its mask.
//
// Everything is bounded (budget.go): a schema's size and nesting, the
// work of its compilation, the states of a string's automaton, the
// parses a state keeps, the work of a mask; a schema past a bound is a
// SchemaError naming it. A value begins only where it can end (every
// node knows the least nesting its values need, every string state the
// lengths that can still reach an accepting one), so a text in the
// grammar can always be completed.
//
// Generated JSON is compact: no whitespace between tokens, properties in
// the schema's order (required ones always, optional ones maybe), then
// undeclared members where the schema gives them a schema. Bounds keep
// what a schema leaves open finite, for a model that never closes a
// value; they never override what the schema requires.
//
// There is no well-kept pure-Go library for token-level decoding
// constrained by a JSON schema (xgrammar, llguidance and Outlines are
// C++, Rust and Python), so this package is written here.
package jsongrammar
