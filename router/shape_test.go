package router

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The bounds that keep the core readable in one pass (issue 32): a
// Router a reader can hold in mind, functions that fit a screen, a
// README that fits one before it scrolls.
const (
	maxRouterMethods = 30
	maxRouterFiles   = 6
	maxFuncLines     = 60
	maxReadmeLines   = 250
)

// TestPackageShape counts what a reader meets: Router's methods and the
// files they are in, the functions longer than a screen in router/ and
// caddymlc/, and the README's lines.
func TestPackageShape(t *testing.T) {
	fset := token.NewFileSet()
	methods, files := 0, map[string]bool{}
	for _, dir := range []string{".", "../caddymlc"} {
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines (at most %d)", p, fd.Name.Name, n, maxFuncLines)
				}
				if dir == "." && receiverName(fd) == "Router" {
					methods++
					files[p] = true
				}
			}
		}
	}
	if methods > maxRouterMethods || len(files) > maxRouterFiles {
		t.Errorf("Router has %d methods in %d files (at most %d in %d): %v", methods, len(files), maxRouterMethods, maxRouterFiles, files)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > maxReadmeLines {
		t.Errorf("README.md is %d lines (at most %d): move the rest to docs/", n, maxReadmeLines)
	}
	t.Logf("Router: %d methods in %d files; README %d lines", methods, len(files), bytes.Count(readme, []byte("\n")))
}

// receiverName is the type of fd's receiver, "" for a function.
func receiverName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
