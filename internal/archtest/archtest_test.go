package archtest

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fzipp/gocyclo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/runbook/runbook/"

// source is one non-test Go file of the module.
type source struct {
	path    string // relative to the module root, slash separated
	pkg     string // its directory, relative to the root
	imports []string
	lines   int
	data    []byte
	funcs   gocyclo.Stats // the cyclomatic complexity of each function
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.NoError(t, err, "the module root is two levels up")
	return dir
}

// sources reads every non-test, non-generated Go file of the module.
func sources(t *testing.T) []source {
	t.Helper()
	base := root(t)
	var out []source
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != base && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if generated(data) {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, data, 0)
		if err != nil {
			return err
		}
		s := source{path: rel, pkg: filepath.ToSlash(filepath.Dir(rel)), data: data, lines: bytes.Count(data, []byte("\n")),
			funcs: gocyclo.AnalyzeASTFile(f, fset, nil)}
		for _, im := range f.Imports {
			v, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(v, module) {
				s.imports = append(s.imports, strings.TrimPrefix(v, module))
			}
		}
		out = append(out, s)
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

// generated reports the "Code generated ... DO NOT EDIT." marker of Go.
func generated(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			return true
		}
	}
	return false
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// layering lists, for packages under a directory, the directories they must
// not import.
var layering = []struct {
	from   string
	banned []string
	why    string
}{
	{"internal/fault", []string{"internal", "cmd"}, "fault is the bottom layer"},
	{"internal/egress", []string{"internal", "cmd"}, "the destination policy is a leaf below the steps and the config"},
	{"internal/metric", []string{"internal", "cmd"}, "the /metrics format is a leaf: the server gives it the values"},
	{"internal/cloud", []string{"internal/steps", "internal/engine", "internal/playbook", "internal/server", "internal/trigger", "internal/sim", "cmd"},
		"cloud clients sit below the step contract"},
	{"internal/steps", []string{"internal/engine", "internal/server", "internal/trigger", "internal/playbook", "cmd"},
		"step families know the step contract, not the engine"},
	{"internal/engine", []string{"internal/steps/core", "internal/steps/nks", "internal/steps/network", "internal/steps/easymaker",
		"internal/steps/notice", "internal/steps/objectstorage", "internal/steps/logncrash", "internal/steps/ssh", "internal/steps/all", "internal/cloud",
		"internal/server", "internal/trigger", "cmd"}, "the engine imports no step family and nothing above it"},
	{"internal/state", []string{"internal/engine", "internal/steps", "internal/server", "internal/trigger", "cmd"},
		"stores know records, not what produces them"},
}

func TestImportsPointDown(t *testing.T) {
	checked := 0
	for _, s := range sources(t) {
		for _, rule := range layering {
			if !under(s.pkg, rule.from) {
				continue
			}
			checked++
			for _, im := range s.imports {
				if under(im, rule.from) {
					continue
				}
				for _, b := range rule.banned {
					assert.False(t, under(im, b), "%s imports %s: %s", s.path, im, rule.why)
				}
			}
		}
	}
	assert.Greater(t, checked, 50, "the rules matched too few files: did the layout move?")
}

func TestTheBannedImportCheckCatchesOne(t *testing.T) {
	s := source{path: "internal/cloud/x/x.go", pkg: "internal/cloud/x", imports: []string{"internal/steps"}}
	hit := false
	for _, rule := range layering {
		if under(s.pkg, rule.from) {
			for _, b := range rule.banned {
				hit = hit || under(s.imports[0], b)
			}
		}
	}
	assert.True(t, hit)
	assert.False(t, under("internal/stepsx", "internal/steps"))
}

// maxLines bounds a non-test, non-generated Go file.
const maxLines = 800

func TestNoSourceFileIsOverTheLineBound(t *testing.T) {
	var over []string
	for _, s := range sources(t) {
		if s.lines > maxLines {
			over = append(over, s.path+" ("+strconv.Itoa(s.lines)+" lines)")
		}
	}
	sort.Strings(over)
	assert.Empty(t, over, "split these files by concept (bound: %d lines)", maxLines)
}

func TestGeneratedMarkerIsRecognised(t *testing.T) {
	assert.True(t, generated([]byte("// Code generated by x. DO NOT EDIT.\n\npackage a\n")))
	assert.False(t, generated([]byte("package a\n// Code generated by x. DO NOT EDIT.\n")))
	assert.False(t, generated([]byte("// Package a is hand written.\npackage a\n")))
}

// maxComplexity bounds the cyclomatic complexity of a function (gocyclo's
// count) in non-test, non-generated code.
const maxComplexity = 30

func TestNoFunctionIsOverTheComplexityBound(t *testing.T) {
	var over []string
	funcs := 0
	for _, s := range sources(t) {
		funcs += len(s.funcs)
		for _, st := range s.funcs {
			if st.Complexity > maxComplexity {
				over = append(over, s.path+": "+st.FuncName+" ("+strconv.Itoa(st.Complexity)+")")
			}
		}
	}
	sort.Strings(over)
	assert.Greater(t, funcs, 1000, "too few functions analysed: is the walk reading the tree?")
	assert.Empty(t, over, "split these functions into named steps (bound: %d)", maxComplexity)
}
