package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNothingIsCompiledAtStartUp holds issue 31's rule for the patterns
// and templates: every runbook process initialises every package it
// links, `runbook version` included, so a package-level variable does not
// compile a regular expression, parse a template or load a time zone. It
// builds it on first use (sync.OnceValue) instead. The commands under tools/ are not runbook
// and may.
func TestNothingIsCompiledAtStartUp(t *testing.T) {
	checked := 0
	for _, s := range sources(t) {
		if !under(s.pkg, "internal") && !under(s.pkg, "cmd") {
			continue // tools/ and deploy/ are not in the runbook binary
		}
		f, err := parser.ParseFile(token.NewFileSet(), s.path, s.data, 0)
		require.NoError(t, err)
		for _, c := range startUpCompiles(f) {
			t.Errorf("%s: %s at package level: every runbook process would build it at start; build it on first use (sync.OnceValue)", s.path, c)
		}
		checked++
	}
	assert.Greater(t, checked, 300, "the module's sources were read")
}

func TestTheStartUpCompileCheckCatchesOne(t *testing.T) {
	src := `package x
var (
	a = regexp.MustCompile("a")
	b = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("b") })
	c = template.Must(template.New("c").Parse("{{.}}"))
	d = strings.NewReplacer("a", "b")
)
var e, f = 1, regexp.MustCompilePOSIX("f")
var h = func() *time.Location { l, _ := time.LoadLocation("h"); return l }()
func g() { _ = regexp.MustCompile("g") }
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"regexp.MustCompile", "template.Must", "regexp.MustCompilePOSIX", "time.LoadLocation"}, startUpCompiles(f))
}

// startUpCompiles lists the compiling calls made by f's package-level
// variables' values, outside function literals (those run when called),
// but inside one called there.
func startUpCompiles(f *ast.File) []string {
	compiles := map[string][]string{
		"regexp":   {"MustCompile", "MustCompilePOSIX", "Compile", "CompilePOSIX"},
		"template": {"Must"},
		"time":     {"LoadLocation"}, // a file read: a blocking call, and a thread
	}
	var out []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				called := map[*ast.FuncLit]bool{} // run at start: var x = func() T { ... }()
				ast.Inspect(v, func(n ast.Node) bool {
					if lit, ok := n.(*ast.FuncLit); ok {
						return called[lit]
					}
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					if lit, ok := call.Fun.(*ast.FuncLit); ok {
						called[lit] = true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if pkg, ok := sel.X.(*ast.Ident); ok {
						for _, name := range compiles[pkg.Name] {
							if sel.Sel.Name == name {
								out = append(out, pkg.Name+"."+name)
								return false
							}
						}
					}
					return true
				})
			}
		}
	}
	return out
}
