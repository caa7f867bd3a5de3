package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// mlcFunctionString builds the function_string mlc_llm serve puts into a
// conversation template for a request with tools and tool_choice "auto"
// (ChatCompletionRequest.check_function_call_usage): Python's
// json.dumps of the list of each tool's function, dumped by pydantic as
// {"description", "name", "parameters"} in that order, description null
// when absent, other fields dropped.
func mlcFunctionString(tools []json.RawMessage) (string, error) {
	var b strings.Builder
	b.WriteByte('[')
	for i, raw := range tools {
		var tool struct {
			Type     string `json:"type"`
			Function *struct {
				Description json.RawMessage `json:"description"`
				Name        *string         `json:"name"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			return "", fmt.Errorf("chat: tools[%d]: %v: %w", i, err, ErrUnsupported)
		}
		if tool.Type != "function" {
			return "", fmt.Errorf("chat: tools[%d]: only tools of type \"function\" are supported, not %q: %w", i, tool.Type, ErrUnsupported)
		}
		f := tool.Function
		if f == nil || f.Name == nil || len(f.Parameters) == 0 || f.Parameters[0] != '{' {
			return "", fmt.Errorf("chat: tools[%d]: function needs a name and a parameters object: %w", i, ErrUnsupported)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"description": `)
		desc := f.Description
		if len(desc) == 0 {
			desc = json.RawMessage("null")
		}
		if err := writePyJSON(&b, desc); err != nil {
			return "", fmt.Errorf("chat: tools[%d]: description: %w", i, err)
		}
		b.WriteString(`, "name": `)
		writePyString(&b, *f.Name)
		b.WriteString(`, "parameters": `)
		if err := writePyJSON(&b, f.Parameters); err != nil {
			return "", fmt.Errorf("chat: tools[%d]: parameters: %w", i, err)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String(), nil
}

// mlcNamedFunctionString is MLC's function_string for a tool_choice that
// names function name: the function alone, as pydantic's
// model_dump_json writes MLC's ChatFunction (its fields in declaration
// order, description null when absent, no spaces).
func mlcNamedFunctionString(tools []json.RawMessage, name string) (string, error) {
	for i, raw := range tools {
		var tool struct {
			Function struct {
				Description json.RawMessage `json:"description"`
				Name        string          `json:"name"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			return "", fmt.Errorf("chat: tools[%d]: %v: %w", i, err, ErrUnsupported)
		}
		f := tool.Function
		if f.Name != name {
			continue
		}
		desc := f.Description
		if len(desc) == 0 {
			desc = json.RawMessage("null")
		}
		nameJSON, _ := json.Marshal(f.Name)
		var b bytes.Buffer
		b.WriteString(`{"description":`)
		if err := json.Compact(&b, desc); err != nil {
			return "", fmt.Errorf("chat: tools[%d]: description: %v: %w", i, err, ErrUnsupported)
		}
		b.WriteString(`,"name":` + string(nameJSON) + `,"parameters":`)
		if err := json.Compact(&b, f.Parameters); err != nil {
			return "", fmt.Errorf("chat: tools[%d]: parameters: %v: %w", i, err, ErrUnsupported)
		}
		b.WriteByte('}')
		return b.String(), nil
	}
	return "", fmt.Errorf("chat: tool_choice names %q, which is not among the tools: %w", name, ErrUnsupported)
}

// writePyJSON re-encodes the JSON value raw the way Python's json.dumps
// with default arguments does: ", " and ": " separators, object keys in
// their original order, non-ASCII escaped (ensure_ascii), integers as
// written and other numbers as Python's float repr.
func writePyJSON(b *strings.Builder, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := writePyValue(b, dec); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}

func writePyValue(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		closing := byte(']')
		if t == '{' {
			closing = '}'
		}
		b.WriteByte(byte(t))
		for n := 0; dec.More(); n++ {
			if n > 0 {
				b.WriteString(", ")
			}
			if t == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				writePyString(b, key.(string))
				b.WriteString(": ")
			}
			if err := writePyValue(b, dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteByte(closing)
	case string:
		writePyString(b, t)
	case json.Number:
		b.WriteString(pyNumber(t))
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case nil:
		b.WriteString("null")
	}
	return nil
}

// pyNumber formats a JSON number as Python prints the int or float that
// json.loads makes of it.
func pyNumber(n json.Number) string {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return s
	}
	return pyFloatRepr(f)
}

// pyFloatRepr is Python's repr of a float: the shortest round-tripping
// digits, in positional notation when the decimal exponent is in
// (-4, 16], else in exponent notation with at least two exponent digits.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			return sign + digits[:decpt] + "." + digits[decpt:]
		}
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es, exp = "-", -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
}

// writePyString writes s as a JSON string the way Python's json.dumps
// does with ensure_ascii: \uXXXX (lower-case hex, surrogate pairs above
// U+FFFF) for every non-ASCII rune and control character.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (r >= 0x7f && r <= 0xffff):
				if r == utf8.RuneError {
					r = 0xfffd
				}
				fmt.Fprintf(b, `\u%04x`, r)
			case r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
