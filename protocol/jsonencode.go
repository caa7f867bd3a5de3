package protocol

import (
	"encoding/json"
	"math"
	"strconv"
)

// The writer of the hand-written JSON encoders (CompletionRequest's and
// CompletionResponse's AppendJSON), each held byte for byte to
// json.Marshal by a fuzz test: the counterpart of jsonScanner.

// objectEncoder writes the members of a JSON object.
type objectEncoder struct {
	b     []byte
	comma bool
	err   error
}

func (e *objectEncoder) key(k string) {
	if e.comma {
		e.b = append(e.b, ',')
	}
	e.comma = true
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

// int writes an integer member.
func (e *objectEncoder) int(k string, n int64) {
	e.key(k)
	e.b = strconv.AppendInt(e.b, n, 10)
}

// optInt writes an optional integer member.
func (e *objectEncoder) optInt(k string, v *int) {
	if v != nil {
		e.int(k, int64(*v))
	}
}

// str writes a string member.
func (e *objectEncoder) str(k, v string) {
	e.key(k)
	e.b = AppendJSONString(e.b, v)
}

// appendJSONArray appends vs as a JSON array, each element written by
// elem.
func appendJSONArray[T any](dst []byte, vs []T, elem func([]byte, T) []byte) []byte {
	dst = append(dst, '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = elem(dst, v)
	}
	return append(dst, ']')
}

// float writes an optional number member as encoding/json writes a
// float64: the shortest form that reads back, with an exponent only for
// magnitudes under 1e-6 or from 1e21, written e-7 rather than e-07. NaN
// and the infinities are an error, as there.
func (e *objectEncoder) float(k string, v *float64) {
	if v == nil {
		return
	}
	f := *v
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.err = &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
		return
	}
	e.key(k)
	e.b = appendJSONFloat(e.b, f)
}

// appendJSONFloat appends f, a finite number, as encoding/json writes a
// float64 (see objectEncoder.float).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
