package mlcschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// A small restatement of pydantic's model semantics: a model is an object
// with fields, each of a type and a mode (required or not, nullable or
// not), and validators that run once the fields are valid, as pydantic's
// "after" validators do.

// Violation is one broken rule: the path of the value and what is wrong.
type Violation struct {
	// Path locates the value: "" for the whole body, then field names
	// and indices, as in choices[0].delta.role.
	Path    string
	Message string
}

func (v Violation) String() string {
	if v.Path == "" {
		return v.Message
	}
	return v.Path + ": " + v.Message
}

// Error is the result of a failed check: the model checked and every
// violation found, in document order.
type Error struct {
	Model      string
	Violations []Violation
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return fmt.Sprintf("mlcschema: %s: %s", e.Model, strings.Join(parts, "; "))
}

// checker collects violations.
type checker struct{ violations []Violation }

func (c *checker) fail(path, format string, args ...any) {
	c.violations = append(c.violations, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
}

// passes reports whether v is of type t, without recording anything: for
// unions and validators that branch on a value's type.
func passes(t typ, v any) bool {
	var scratch checker
	t.check(&scratch, "", v)
	return len(scratch.violations) == 0
}

// typ is a field type: it checks a decoded JSON value (nil, bool, string,
// json.Number, []any or map[string]any). Only Any accepts null: a field
// that may be null says so by its mode, an element of a list cannot be.
type typ interface {
	check(c *checker, path string, v any)
	String() string
}

type (
	strType   struct{}
	intType   struct{}
	floatType struct{}
	boolType  struct{}
	anyType   struct{}
	// literal is Literal["a", "b"] (string literals only: MLC has no other).
	literal []string
	listOf  struct{ elem typ }
	// dictOf is Dict[K, V]; intKeys is K = int.
	dictOf struct {
		intKeys bool
		val     typ
	}
	union []typ
)

var (
	str     typ = strType{}
	integ   typ = intType{}
	float   typ = floatType{}
	boolean typ = boolType{}
	anyV    typ = anyType{}
	// dict is a bare Dict: any object.
	dict typ = dictOf{val: anyType{}}
)

func (strType) String() string   { return "str" }
func (intType) String() string   { return "int" }
func (floatType) String() string { return "float" }
func (boolType) String() string  { return "bool" }
func (anyType) String() string   { return "Any" }
func (l literal) String() string { return fmt.Sprintf("Literal%q", []string(l)) }
func (l listOf) String() string  { return "List[" + l.elem.String() + "]" }
func (d dictOf) String() string {
	if d.intKeys {
		return "Dict[int, " + d.val.String() + "]"
	}
	return "Dict[str, " + d.val.String() + "]"
}
func (u union) String() string {
	names := make([]string, len(u))
	for i, t := range u {
		names[i] = t.String()
	}
	return "Union[" + strings.Join(names, ", ") + "]"
}

func (strType) check(c *checker, path string, v any) {
	if _, ok := v.(string); !ok {
		c.fail(path, "want a string, got %s", kind(v))
	}
}

func (intType) check(c *checker, path string, v any) {
	if _, ok := asInt(v); !ok {
		c.fail(path, "want an integer, got %s", kind(v))
	}
}

func (floatType) check(c *checker, path string, v any) {
	if _, ok := v.(json.Number); !ok {
		c.fail(path, "want a number, got %s", kind(v))
	}
}

func (boolType) check(c *checker, path string, v any) {
	if _, ok := v.(bool); !ok {
		c.fail(path, "want a boolean, got %s", kind(v))
	}
}

func (anyType) check(*checker, string, any) {}

func (l literal) check(c *checker, path string, v any) {
	if s, ok := v.(string); !ok || !slices.Contains(l, s) {
		c.fail(path, "want one of %q, got %s", []string(l), show(v))
	}
}

func (l listOf) check(c *checker, path string, v any) {
	items, ok := v.([]any)
	if !ok {
		c.fail(path, "want an array (%s), got %s", l, kind(v))
		return
	}
	for i, item := range items {
		l.elem.check(c, fmt.Sprintf("%s[%d]", path, i), item)
	}
}

func (d dictOf) check(c *checker, path string, v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		c.fail(path, "want an object (%s), got %s", d, kind(v))
		return
	}
	for _, k := range sortedKeys(obj) {
		p := fmt.Sprintf("%s[%q]", path, k)
		if d.intKeys && !isIntString(k) {
			c.fail(p, "key %q is not an integer", k)
		}
		d.val.check(c, p, obj[k])
	}
}

func (u union) check(c *checker, path string, v any) {
	for _, t := range u {
		if passes(t, v) {
			return
		}
	}
	c.fail(path, "want %s, got %s", u, kind(v))
}

// mode is how a field may be given: pydantic's required (no default),
// Optional[X] without a default (required, may be null), Optional[X] =
// None (may be absent or null), and X = default (may be absent, not null).
type mode int

const (
	required mode = iota
	requiredOrNull
	optional
	defaulted
)

type field struct {
	name string
	t    typ
	mode mode
}

// validator is a model's after-validator; it sees a model whose fields are
// all valid.
type validator func(c *checker, path string, obj map[string]any)

// model is a pydantic BaseModel: unknown fields are ignored, as its default
// configuration does.
type model struct {
	name       string
	fields     []field
	validators []validator
}

func (m *model) String() string { return m.name }

func (m *model) check(c *checker, path string, v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		c.fail(path, "want an object (%s), got %s", m.name, kind(v))
		return
	}
	before := len(c.violations)
	for _, f := range m.fields {
		fv, present := obj[f.name]
		p := join(path, f.name)
		switch {
		case !present:
			if f.mode == required || f.mode == requiredOrNull {
				c.fail(p, "required (%s)", f.t)
			}
		case fv == nil:
			if f.mode == required || f.mode == defaulted {
				c.fail(p, "may not be null (%s)", f.t)
			}
		default:
			f.t.check(c, p, fv)
		}
	}
	if len(c.violations) > before {
		return
	}
	for _, validate := range m.validators {
		validate(c, path, obj)
	}
}

// check decodes raw, one JSON value and nothing after it, and checks it
// against m.
func check(raw []byte, m *model) error {
	c := &checker{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		c.fail("", "invalid JSON: %v", err)
	} else if _, err := dec.Token(); err != io.EOF {
		c.fail("", "invalid JSON: data after the value")
	} else {
		m.check(c, "", v)
	}
	if len(c.violations) == 0 {
		return nil
	}
	return &Error{Model: m.name, Violations: c.violations}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// asInt reads an integer: a JSON number without fraction or exponent.
func asInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

// asFloat reads a number.
func asFloat(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// isIntString reports whether a dict key is an integer: digits with an
// optional sign.
func isIntString(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// kind names a decoded value's JSON type.
func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		if _, ok := asInt(v); ok {
			return "an integer"
		}
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// show writes a scalar for a message: its JSON, or its kind for a
// container.
func show(v any) string {
	switch v.(type) {
	case string, json.Number, bool, nil:
		b, _ := json.Marshal(v)
		return string(b)
	}
	return kind(v)
}
