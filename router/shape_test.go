package router

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
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

// sharedCollector reports the package-level variables of router/ and of
// fleet/ (not their subpackages) allowed all the same: Prometheus
// collectors, one per name in a process, as Caddy's own modules keep
// theirs.
func sharedCollector(name string) bool {
	switch name {
	case "metricsOnce", "metrics", "scaleMetricsOnce", "scaleMetricsVal":
		return true
	}
	return false
}

// TestNoPackageState fails on a package-level var of router/ (its
// subpackages included) or of fleet/, the engines' lifecycle, that may
// hold mutable state: one is allowed only when it is blank (an interface
// check), an error made once, a compiled regexp, or a composite literal
// read as a constant.
func TestNoPackageState(t *testing.T) {
	fset := token.NewFileSet()
	// What the routers share is a Live, and what their engines' lifecycle
	// keeps a fleet.Lifecycle, which their owner passes down.
	for _, root := range []string{".", "../fleet"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
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
						if name.Name == "_" || (filepath.Dir(p) == root && sharedCollector(name.Name)) {
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
}

// constantLike reports whether e is a value made once and only read: an
// error (errors.New, fmt.Errorf), a compiled regexp, or a composite
// literal.
func constantLike(e ast.Expr) bool {
	switch v := e.(type) {
	case *ast.CompositeLit:
		return true
	case *ast.CallExpr:
		sel, ok := v.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return false
		}
		switch pkg.Name + "." + sel.Sel.Name {
		case "errors.New", "fmt.Errorf", "regexp.MustCompile":
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
