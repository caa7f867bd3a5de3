// Package builtinkind registers the built-in engine (package builtin) as
// the engine kind "builtin" (engine.KindBuiltin), with the limits the
// engine reads off its own command line. A binary that runs the built-in
// engine imports it (the adapter does, for `caddy mlc-engine`); package
// engine itself knows no engine's code.
package builtinkind

import (
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
)

func init() {
	engine.RegisterKind(engine.KindBuiltin, engine.BuiltinDriver{Limits: builtin.Limits{}})
}
