package engine

import (
	"strings"

	"go.uber.org/zap/zapcore"
)

// builtinPrefix starts every line the builtin engine writes.
const builtinPrefix = "mlc-engine: "

// lineLevel is the level at which a line of engine output is logged.
// Engines narrate their routine work (model loading, every request), which
// is Debug to Caddy; what an operator must see is told apart by a small
// rule on the line itself:
//
//   - Error: the line contains ERROR, CRITICAL, FATAL or Traceback (Python's
//     logging, uvicorn, TVM, a Python crash), starts with "panic:" or
//     "fatal error:" (a Go crash), or is a builtin engine line (see
//     builtinPrefix) that mentions "panic" or "error" in any case.
//   - Warn: the line contains WARN or Warning (Python's logging and
//     warnings, uvicorn, TVM), or is a builtin engine line without the
//     timestamp of its routine log: its fatal errors, its HTTP server's
//     complaints and its notices about ignored flags have none.
//   - Debug: everything else.
//
// A line that merely mentions a keyword is logged louder than it needs;
// none that matters is hidden. The last lines of an engine's output are
// quoted, whatever their level, in the error of an engine that exits.
func lineLevel(line string) zapcore.Level {
	for _, kw := range []string{"ERROR", "CRITICAL", "FATAL", "Traceback"} {
		if strings.Contains(line, kw) {
			return zapcore.ErrorLevel
		}
	}
	if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
		return zapcore.ErrorLevel
	}
	if rest, ok := strings.CutPrefix(line, builtinPrefix); ok {
		lower := strings.ToLower(rest)
		if strings.Contains(lower, "panic") || strings.Contains(lower, "error") {
			return zapcore.ErrorLevel
		}
		if !startsWithDigit(rest) {
			return zapcore.WarnLevel
		}
	}
	if strings.Contains(line, "WARN") || strings.Contains(line, "Warning") {
		return zapcore.WarnLevel
	}
	return zapcore.DebugLevel
}

func startsWithDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }
