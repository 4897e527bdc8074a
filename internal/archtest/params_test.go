package archtest

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoStepWritesItsParams holds what the engine relies on to give every
// call of a step whose `with` is literal the same decoded params
// (playbook.Step.Decoded): no step family writes to its params. It reads
// the families' source: a write is an assignment, ++ or --, append,
// delete, clear, copy, a sort or an Unmarshal into a params value, a
// field, element or alias of one.
func TestNoStepWritesItsParams(t *testing.T) {
	pkgs := map[string][]*ast.File{}
	fset := token.NewFileSet()
	base := filepath.Join(root(t), "internal", "steps")
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], f)
		return nil
	})
	require.NoError(t, err)
	types := 0
	for _, files := range pkgs {
		types += len(paramsTypes(files))
		for _, w := range paramWrites(fset, files) {
			t.Errorf("%s: a step writes to its params (the engine shares a literal step's params between calls)", w)
		}
	}
	assert.Greater(t, types, 50, "the params types of the step families were found")
}

func TestTheParamsWriteCheckCatchesOne(t *testing.T) {
	src := `package fam
type fooParams struct{ Name string; Env map[string]string; Wait waitParams }
type waitParams struct{ Every int }
var _ = steps.Define(steps.Def[fooParams]{Run: run})
func run(ctx context.Context, c *steps.Call, p *fooParams) (steps.Outputs, error) {
	env := p.Env
	env["A"] = "b"
	p.Name = "x"
	wait(&p.Wait)
	return nil, nil
}
func wait(w *waitParams) { w.Every++ }
func other(q *otherType) { q.Name = "fine" }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fam.go", src, 0)
	require.NoError(t, err)
	writes := paramWrites(fset, []*ast.File{f})
	assert.Equal(t, []string{`fam.go:7:2: env["A"] = "b"`, `fam.go:8:2: p.Name = "x"`, `fam.go:12:28: w.Every++`}, writes)
}

// paramsTypes are the params types of one package's step definitions
// (steps.Def[T], steps.Typed[T]) and the struct types their fields use.
func paramsTypes(files []*ast.File) map[string]bool {
	params := map[string]bool{}
	structs := map[string]*ast.StructType{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.IndexExpr:
				if sel, ok := x.X.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Def" || sel.Sel.Name == "Typed") {
					if id, ok := x.Index.(*ast.Ident); ok {
						params[id.Name] = true
					}
				}
			case *ast.TypeSpec:
				if st, ok := x.Type.(*ast.StructType); ok {
					structs[x.Name.Name] = st
				}
			}
			return true
		})
	}
	for grew := true; grew; {
		grew = false
		for name := range params {
			if st := structs[name]; st != nil {
				ast.Inspect(st, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok && structs[id.Name] != nil && !params[id.Name] {
						params[id.Name], grew = true, true
					}
					return true
				})
			}
		}
	}
	return params
}

// paramWrites lists the writes to params values in one package's files,
// as "file:line:col: statement".
func paramWrites(fset *token.FileSet, files []*ast.File) []string {
	params := paramsTypes(files)
	var out []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			var fields []*ast.Field
			var body *ast.BlockStmt
			switch x := n.(type) {
			case *ast.FuncDecl:
				if x.Recv != nil {
					fields = append(fields, x.Recv.List...)
				}
				fields, body = append(fields, x.Type.Params.List...), x.Body
			case *ast.FuncLit:
				fields, body = x.Type.Params.List, x.Body
			default:
				return true
			}
			names := map[string]bool{}
			for _, fld := range fields {
				if mentions(fld.Type, params) {
					for _, nm := range fld.Names {
						names[nm.Name] = true
					}
				}
			}
			if body == nil || len(names) == 0 {
				return true
			}
			addAliases(body, names)
			ast.Inspect(body, func(m ast.Node) bool {
				if w := paramWrite(m, names); w != nil {
					out = append(out, fset.Position(w.Pos()).String()+": "+nodeText(fset, w))
				}
				return true
			})
			return true
		})
	}
	return out
}

// addAliases adds to names the locals that share memory with a params
// value: those defined from one (x := p.Env) and those ranging over one.
func addAliases(body *ast.BlockStmt, names map[string]bool) {
	ast.Inspect(body, func(m ast.Node) bool {
		switch s := m.(type) {
		case *ast.AssignStmt:
			if s.Tok != token.DEFINE || len(s.Lhs) != len(s.Rhs) {
				return true
			}
			for i, r := range s.Rhs {
				if id, ok := s.Lhs[i].(*ast.Ident); ok && rooted(r, names) {
					names[id.Name] = true
				}
			}
		case *ast.RangeStmt:
			if rooted(s.X, names) {
				for _, e := range []ast.Expr{s.Key, s.Value} {
					if id, ok := e.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		}
		return true
	})
}

// builtinWriters and libraryWriters (by prefix) are the calls that change
// their first argument.
var (
	builtinWriters = map[string]bool{"append": true, "delete": true, "clear": true, "copy": true}
	libraryWriters = []string{"sort.", "slices.Sort", "slices.Reverse", "slices.Delete", "slices.Insert", "maps.Copy", "maps.DeleteFunc"}
)

func writesFirstArgument(fn string) bool {
	if builtinWriters[fn] {
		return true
	}
	for _, w := range libraryWriters {
		if strings.HasPrefix(fn, w) {
			return true
		}
	}
	return false
}

// paramWrite returns m when it writes to a params value named in names.
func paramWrite(m ast.Node, names map[string]bool) ast.Node {
	switch s := m.(type) {
	case *ast.AssignStmt:
		for _, l := range s.Lhs {
			if _, local := l.(*ast.Ident); !local && rooted(l, names) {
				return s
			}
		}
	case *ast.IncDecStmt:
		if rooted(s.X, names) {
			return s
		}
	case *ast.CallExpr:
		fn := exprText(s.Fun)
		if len(s.Args) > 0 && writesFirstArgument(fn) && rooted(s.Args[0], names) {
			return s
		}
		if strings.HasSuffix(fn, "Unmarshal") || strings.HasSuffix(fn, ".Decode") {
			for _, a := range s.Args {
				if u, ok := a.(*ast.UnaryExpr); ok && u.Op == token.AND && rooted(u.X, names) {
					return s
				}
			}
		}
	}
	return nil
}

// rooted reports whether e is a name in names or a field, element, slice
// or dereference of one.
func rooted(e ast.Expr, names map[string]bool) bool {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return names[x.Name]
		case *ast.SelectorExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.SliceExpr:
			e = x.X
		default:
			return false
		}
	}
}

func mentions(e ast.Expr, types map[string]bool) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && types[id.Name] {
			found = true
		}
		return !found
	})
	return found
}

// exprText is a call's function as written, for a selector or a name.
func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	}
	return ""
}

// nodeText is n's source.
func nodeText(fset *token.FileSet, n ast.Node) string {
	var b strings.Builder
	if err := printer.Fprint(&b, fset, n); err != nil {
		return err.Error()
	}
	return b.String()
}
