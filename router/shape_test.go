package router

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	modulePath     = "github.com/caddy-mlc/caddy-mlc"
	maxReadmeLines = 250
)

// layers ranks the module's packages, by path prefix, lowest first: a
// package imports none ranked above its own. Caddy is imported only above
// the core (caddyLayer). Tools, examples and test kits are not ranked.
func layers() []struct {
	prefix string
	rank   int
} {
	return []struct {
		prefix string
		rank   int
	}{
		{"internal/testkit", -1},
		{"internal", 0},
		{"protocol", 1},
		{"engine", 2},
		{"router", 3},
		{"fleet", 4},
		{"cluster", 4},
		{"caddymlc", 5},
	}
}

const caddyLayer = 5

// builtinImporters are the packages that may import the built-in engine
// (engine/builtin and below) besides its own: the adapter, which hosts
// its subcommand and links its kind in, and the test kits. The engine
// layer knows it only as a kind (engine.BuiltinDriver), the router not at
// all.
var builtinImporters = []string{"engine/builtin", "caddymlc", "internal/testkit", "tools"}

// rankOf is the layer of the package in dir (relative to the module's
// root), -1 for one not ranked.
func rankOf(dir string) int {
	_, rank := layerOf(dir)
	return rank
}

// layerOf is the prefix and rank of the package in dir's layer; "" and
// -1 for one not ranked.
func layerOf(dir string) (string, int) {
	for _, l := range layers() {
		if dir == l.prefix || strings.HasPrefix(dir, l.prefix+"/") {
			return l.prefix, l.rank
		}
	}
	return "", -1
}

// under reports whether the package dir is prefix or below it.
func under(dir, prefix string) bool { return dir == prefix || strings.HasPrefix(dir, prefix+"/") }

// TestLayering checks every import of the module's code: the core
// (internal, protocol, engine, router, and the packages beside router)
// imports no Caddy, and no package imports one of a higher layer.
func TestLayering(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	seen := map[string]bool{} // the layers' prefixes with code
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel("..", filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		prefix, rank := layerOf(rel)
		if rank < 0 {
			return nil
		}
		seen[prefix] = true
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			checked++
			if strings.HasPrefix(path, "github.com/caddyserver/") && rank < caddyLayer {
				t.Errorf("%s imports %s: the core imports no Caddy", p, path)
			}
			if dep, ok := strings.CutPrefix(path, modulePath+"/"); ok {
				if r := rankOf(dep); r > rank {
					t.Errorf("%s (layer %d) imports %s (layer %d): an upward import", p, rank, dep, r)
				}
				if under(dep, "engine/builtin") && !slices.ContainsFunc(builtinImporters, func(pre string) bool { return under(rel, pre) }) {
					t.Errorf("%s imports %s: only %v may import the built-in engine", p, dep, builtinImporters)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no imports checked")
	}
	for _, l := range layers() {
		if l.rank >= 0 && !seen[l.prefix] {
			t.Errorf("layer %s has no code: a package moved, and the layers did not follow", l.prefix)
		}
	}
}

// statePackages are the module's packages whose package-level state
// TestNoPackageState checks: the server's code, every layer. Test kits
// and the bench programs (main packages and their flags) are not.
var statePackages = []string{"../internal", "../protocol", "../engine", ".", "../fleet", "../cluster", "../caddymlc"}

// sharedState are the package-level variables that may hold state all
// the same, each for its reason: what every instance of a process must
// share by nature (Prometheus collectors, one per name in a process, as
// Caddy's own modules keep theirs; the engine kinds, registered in init
// as Caddy's modules are; the Redis library's one logger), or a table or
// cache of values that never change once computed.
var sharedState = map[string]string{
	"router/metricsOnce":             "collectors",
	"router/metrics":                 "collectors",
	"fleet/scaleMetricsOnce":         "collectors",
	"fleet/scaleMetricsVal":          "collectors",
	"cluster/metricsOnce":            "collectors",
	"cluster/upGauge":                "collectors",
	"cluster/dropped":                "collectors",
	"cluster/prefixApplied":          "collectors",
	"cluster/sessionsApplied":        "collectors",
	"cluster/libraryLog":             "go-redis has one logger per process (redis.SetLogger)",
	"cluster/libraryLogSet":          "go-redis has one logger per process (redis.SetLogger)",
	"engine/kinds":                   "the kinds registry, written in init (as caddy.RegisterModule)",
	"engine/tokenizer/byteToRune":    "GPT-2's byte table, computed in init",
	"engine/tokenizer/runeToByte":    "GPT-2's byte table, computed in init",
	"protocol/knownKeys":             "a cache of each struct type's JSON names, a pure function of the type",
	"engine/tokenizer/tiny/wordList": "go:embed",
	"caddymlc/fleetPageHTML":         "go:embed",
	"caddymlc/mlccheck/words":        "a word list, split once",
}

// TestNoPackageState fails on a package-level var of the server's code
// (statePackages) that may hold mutable state: one is allowed only when
// it is blank (an interface check), an error, a compiled regexp or
// script, a composite literal read as a constant, a value made once and
// only read (sync.OnceValue), a Caddy UsagePool (Caddy's way to keep
// what outlives a reload), or one of sharedState's, each for its reason.
// Everything else is a field of what owns it, passed down.
func TestNoPackageState(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range statePackages {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "testkit") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			rel, err := relToModule(filepath.Dir(p))
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if name.Name == "_" || sharedState[filepath.ToSlash(rel)+"/"+name.Name] != "" {
							continue
						}
						if i >= len(vs.Values) || !constantLike(vs.Values[i]) {
							t.Errorf("%s: package-level var %s may hold mutable state: make it a field of what owns it", fset.Position(name.Pos()), name.Name)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for key := range sharedState {
		if _, err := os.Stat(filepath.Join("..", filepath.Dir(key))); err != nil {
			t.Errorf("sharedState names %s, whose package is gone", key)
		}
	}
}

// relToModule is dir (relative to router/) relative to the module's root.
func relToModule(dir string) (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.Rel(root, abs)
}

// constantLike reports whether e is a value made once and only read: an
// error (errors.New, fmt.Errorf), a compiled regexp or Redis script, a
// composite literal (or its address), bytes of a literal, a value made
// once (sync.OnceValue), or a Caddy UsagePool.
func constantLike(e ast.Expr) bool {
	switch v := e.(type) {
	case *ast.CompositeLit:
		return true
	case *ast.UnaryExpr:
		_, lit := v.X.(*ast.CompositeLit)
		return v.Op == token.AND && lit
	case *ast.CallExpr:
		if at, ok := v.Fun.(*ast.ArrayType); ok && len(v.Args) == 1 {
			_, lit := v.Args[0].(*ast.BasicLit)
			return at.Len == nil && lit
		}
		sel, ok := v.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return false
		}
		switch pkg.Name + "." + sel.Sel.Name {
		case "errors.New", "fmt.Errorf", "regexp.MustCompile", "redis.NewScript", "sync.OnceValue", "caddy.NewUsagePool":
			return true
		}
	}
	return false
}

// TestReadmeFitsAScreen keeps the README to what a newcomer reads before
// it scrolls; the rest belongs in docs/.
func TestReadmeFitsAScreen(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > maxReadmeLines {
		t.Errorf("README.md is %d lines (at most %d): move the rest to docs/", n, maxReadmeLines)
	}
}

// maxFuncLines bounds a function of the request path, so that a reader
// sees each step whole.
const maxFuncLines = 60

// TestFunctionsFitAScreen fails on a function of router/ (its top level,
// the request path) longer than maxFuncLines.
func TestFunctionsFitAScreen(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines (at most %d): split it where a reader would pause", fset.Position(fd.Pos()), fd.Name.Name, n, maxFuncLines)
			}
		}
	}
}
