package jsongrammar

import "fmt"

// Bounds of a schema, of its compilation and of what it generates. A
// schema past one of them is refused (SchemaError, naming the bound), so
// that no request makes an engine compile, or walk a state, for long.
const (
	MaxSchemaBytes = 64 << 10 // a schema's JSON text
	MaxSchemaDepth = 64       // nesting of subschemas in the text
	MaxNodes       = 1 << 14  // grammar nodes a schema compiles to
	MaxLiterals    = 4096     // enum and const values, over the whole schema
	MaxStackDepth  = 32       // nesting of generated values
	MaxDigits      = 16       // digits of a number's integer, fraction or exponent part

	// MaxCompileSteps bounds the work of one compilation: walking the
	// schema, merging its subschemas, building the automata of its
	// patterns, formats and numbers. A step is about the cost of one
	// transition of a regular expression's subset construction; the
	// bound is well under a second of one core.
	MaxCompileSteps = 1 << 20
	// MaxPatternStates bounds the states of one string's automaton (its
	// pattern, format and lengths together).
	MaxPatternStates = 4096
	// MaxTops bounds the parses a State keeps at once: past it, the
	// ones that sort last are dropped (the text stays valid: each kept
	// parse can complete).
	MaxTops = 64
	// MaxMaskSteps bounds the work of one token mask, in transitions
	// of the vocabulary's byte trie weighted by the parses they step. A
	// mask past it admits the tokens of one byte only (see Mask).
	MaxMaskSteps = 4 << 20
)

// SchemaError is a schema the package cannot compile. Keyword names the
// offending keyword (empty when the schema is malformed as a whole, or
// too big or costly: then Bound names the bound) and Path where it is,
// as a JSON pointer.
type SchemaError struct {
	Keyword string
	Path    string
	Bound   string
	Msg     string
}

func (e *SchemaError) Error() string {
	if e.Keyword == "" {
		return "schema: " + e.Msg
	}
	return fmt.Sprintf("schema keyword %q at %q: %s", e.Keyword, e.Path, e.Msg)
}

// budget counts the steps of a compilation.
type budget struct {
	left int64
}

// budgetError is a compilation past MaxCompileSteps.
func budgetError() *SchemaError {
	return &SchemaError{Bound: "MaxCompileSteps", Msg: fmt.Sprintf("compiling it takes more than %d steps (MaxCompileSteps)", MaxCompileSteps)}
}

// spend takes n steps; false once the budget is spent.
func (b *budget) spend(n int) bool {
	if b == nil {
		return true
	}
	b.left -= int64(n)
	return b.left >= 0
}
