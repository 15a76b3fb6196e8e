package ringflow_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLibraryLogsOnlyThroughConfig checks the source of every library
// package (all but cmd/ and bench/, tests excluded): none imports the
// log package, names os.Stderr or os.Stdout, or calls print or println.
// A library reports through the *slog.Logger of its Config or Options,
// which the embedding program routes (see Config.Logger).
func TestLibraryLogsOnlyThroughConfig(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			// NB: internal/pgtest is test support: it reports to the test
			// binary's output, where a test's output goes.
			case path == "cmd" || path == "bench" || path == "internal/pgtest" || name == "testdata" ||
				path != "." && strings.HasPrefix(name, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "log" {
				t.Errorf("%s imports log: log through a *slog.Logger instead", fset.Position(imp.Pos()))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "os" && (n.Sel.Name == "Stderr" || n.Sel.Name == "Stdout") {
					t.Errorf("%s uses os.%s: log through a *slog.Logger instead", fset.Position(n.Pos()), n.Sel.Name)
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "print" || id.Name == "println") {
					t.Errorf("%s calls %s: log through a *slog.Logger instead", fset.Position(n.Pos()), id.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files: the walk missed the library", checked)
	}
}
