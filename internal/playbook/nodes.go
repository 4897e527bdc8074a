package playbook

import (
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/yamlnode"

	"github.com/runbook/runbook/internal/suggest"
)

// Caps on hostile input. See doc.go.
const (
	// DefaultMaxBytes is the largest source Load and Parse accept unless
	// LoadOptions.MaxBytes says otherwise.
	DefaultMaxBytes = 1 << 20
	// MaxNodes is the most YAML nodes a document may expand to, aliases
	// followed.
	MaxNodes = 100_000
	// MaxDepth is the deepest nesting of mappings and lists.
	MaxDepth = 64
	// MaxSteps is the most steps of a playbook (steps, on_failure and
	// finally together).
	MaxSteps = 10_000
	// MaxDiagnostics is the most diagnostics reported; past it the loader
	// stops (a hostile file would otherwise cost one did-you-mean search
	// per broken reference).
	MaxDiagnostics = 200
)

// durationExamples are the durations a message about a value that is no
// duration suggests.
const durationExamples = "30s, 5m, 2h, 1d"

// loader holds the state of one Parse: the diagnostics found so far.
// Its Reader reports through errf.
type loader struct {
	yamlnode.Reader
	file    string
	src     []byte
	lines   []string // source lines, for block scalar columns
	diags   Diagnostics
	secrets map[string]bool // secret names referenced by expressions
	tpls    map[tplKey]expr.Value
}

func (l *loader) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: l.file, Line: 1, Col: 1}
	}
	return Pos{File: l.file, Line: n.Line, Col: n.Column}
}

// full reports whether the diagnostics cap is reached.
func (l *loader) full() bool { return len(l.diags) >= MaxDiagnostics }

// errf records a diagnostic at node n.
func (l *loader) errf(n *yaml.Node, path, format string, args ...any) {
	l.diags = append(l.diags, Diagnostic{Pos: l.pos(n), Path: path, Message: fmt.Sprintf(format, args...)})
}

// errAt records a diagnostic at an explicit position.
func (l *loader) errAt(p Pos, path, format string, args ...any) {
	l.diags = append(l.diags, Diagnostic{Pos: p, Path: path, Message: fmt.Sprintf(format, args...)})
}

// newLoader starts the Parse of src, named file in positions.
func newLoader(file string, src []byte) *loader {
	l := &loader{file: file, src: src}
	l.Reader = yamlnode.Reader{Errorf: l.errf}
	return l
}

// parseYAML parses src into its document node. A syntax error is reported
// as a single diagnostic at the parser's position.
func (l *loader) parseYAML() *yaml.Node {
	doc, se := yamlnode.Load(l.src)
	switch {
	case se != nil:
		l.errAt(Pos{File: l.file, Line: se.Line, Col: se.Col}, "", "%s", se.Message)
		return nil
	case doc == nil:
		l.errAt(l.pos(nil), "", "empty playbook")
		return nil
	}
	return doc
}

// measure walks the document following aliases and refuses it when it
// expands to more than MaxNodes nodes, nests deeper than MaxDepth, or holds
// an alias cycle. Shared subtrees are visited once (their size is
// memoised), so the walk costs the size of the source, not of the expansion.
func (l *loader) measure(root *yaml.Node) bool {
	m := measurer{memo: map[*yaml.Node]size{}, active: map[*yaml.Node]bool{}}
	m.walk(root, 0)
	if m.fail == nil {
		return true
	}
	l.errf(m.failAt, "", "%s", m.fail.Error())
	return false
}

type size struct{ count, height int }

type measurer struct {
	memo   map[*yaml.Node]size
	active map[*yaml.Node]bool
	total  int
	fail   error
	failAt *yaml.Node
}

func (m *measurer) stop(n *yaml.Node, format string, args ...any) {
	if m.fail == nil {
		m.fail, m.failAt = fmt.Errorf(format, args...), n
	}
}

// walk returns the expanded size of n found at depth.
func (m *measurer) walk(n *yaml.Node, depth int) size {
	if m.fail != nil || n == nil {
		return size{}
	}
	target := n
	if n.Kind == yaml.AliasNode {
		target = n.Alias
		if target == nil {
			m.stop(n, "unknown anchor %q", n.Value)
			return size{}
		}
		if m.active[target] {
			m.stop(n, "alias *%s refers to a node that contains it (alias cycle)", n.Value)
			return size{}
		}
	}
	if s, ok := m.memo[target]; ok {
		m.total += s.count
		if m.total > MaxNodes {
			m.stop(n, "document expands to more than %d nodes (alias bomb?)", MaxNodes)
		} else if depth+s.height > MaxDepth {
			m.stop(n, "nesting deeper than %d levels", MaxDepth)
		}
		return s
	}
	m.total++
	if m.total > MaxNodes {
		m.stop(n, "document expands to more than %d nodes (alias bomb?)", MaxNodes)
		return size{}
	}
	nest := 0
	if target.Kind == yaml.MappingNode || target.Kind == yaml.SequenceNode {
		nest = 1
		if depth+1 > MaxDepth {
			m.stop(target, "nesting deeper than %d levels", MaxDepth)
			return size{}
		}
	}
	m.active[target] = true
	s := size{count: 1}
	for _, c := range target.Content {
		cs := m.walk(c, depth+nest)
		if m.fail != nil {
			break
		}
		s.count += cs.count
		s.height = max(s.height, cs.height)
	}
	delete(m.active, target)
	s.height += nest
	m.memo[target] = s
	return s
}

// oneOf decodes a string that must be one of values.
func (l *loader) oneOf(n *yaml.Node, path string, values ...string) (string, bool) {
	s, ok := l.Str(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(values, s) {
		l.errf(n, path, "must be one of %s (got %q)%s", strings.Join(values, ", "), s, suggest.Hint(s, values))
		return "", false
	}
	return s, true
}
