package playtest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/yamlnode"
)

// durationExamples are the durations a message about a value that is no
// duration suggests.
const durationExamples = "30s, 5m, 2h, 1d"

// loader holds the state of one Load: the diagnostics found so far. Its
// Reader reports through errf.
type loader struct {
	yamlnode.Reader
	file  string
	diags playbook.Diagnostics
	pb    *playbook.Playbook
}

// newLoader starts the Load of the file at path.
func newLoader(path string) *loader {
	l := &loader{file: path}
	l.Reader = yamlnode.Reader{Errorf: l.errf}
	return l
}

func (l *loader) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: l.file, Line: 1, Col: 1}
	}
	return Pos{File: l.file, Line: n.Line, Col: n.Column}
}

// errf records a diagnostic at node n; it is the yamlnode.Errorf of the
// loader.
func (l *loader) errf(n *yaml.Node, path, format string, args ...any) {
	l.diags = append(l.diags, playbook.Diagnostic{Pos: l.pos(n), Path: path, Message: fmt.Sprintf(format, args...)})
}

// text decodes a scalar of any type as its text (a version written
// without quotes stays "v1.31.4"; a number 3 becomes "3").
func (l *loader) text(n *yaml.Node, path string) (string, bool) {
	n = yamlnode.Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		l.errf(n, path, "must be a string (got %s)", yamlnode.KindWord(n))
		return "", false
	}
	return n.Value, true
}

// positive decodes a number more than 0.
func (l *loader) positive(n *yaml.Node, path string) (float64, bool) {
	v, ok := l.Number(n, path)
	if ok && v <= 0 {
		l.errf(n, path, "must be more than 0 (got %v)", v)
		return 0, false
	}
	return v, true
}

// timestamp decodes an RFC 3339 time.
func (l *loader) timestamp(n *yaml.Node, path string) (time.Time, bool) {
	s, ok := l.text(n, path)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		l.errf(n, path, "must be an RFC 3339 time like 2026-11-28T03:00:00+09:00 (got %q)", s)
		return time.Time{}, false
	}
	return t, true
}

// mapping returns the pairs of a mapping node (nil when it is not one).
func (l *loader) mapping(n *yaml.Node, path string) []yamlnode.Pair {
	o := yamlnode.Mapping(l.errf, n, path)
	if o == nil {
		return nil
	}
	return o.Pairs
}

// list returns the elements of a sequence node (nil when it is not one).
func (l *loader) list(n *yaml.Node, path string) []*yaml.Node {
	items, _ := l.List(n, path)
	return items
}

// template compiles a value whose strings may hold ${{ }} expressions over
// the case's environment (env.TEST_DIR, env.TEST_SINK, ...).
func (l *loader) template(n *yaml.Node, path string) expr.Value {
	n = yamlnode.Deref(n)
	switch {
	case n == nil:
		return expr.Literal(nil)
	case n.Kind == yaml.MappingNode:
		pairs := l.mapping(n, path)
		keys := make([]string, 0, len(pairs))
		vals := make([]expr.Value, 0, len(pairs))
		for _, p := range pairs {
			keys = append(keys, p.Name)
			vals = append(vals, l.template(p.Val, yamlnode.KeyPath(path, p.Name)))
		}
		return expr.Map(keys, vals)
	case n.Kind == yaml.SequenceNode:
		vals := make([]expr.Value, len(n.Content))
		for i, e := range n.Content {
			vals[i] = l.template(e, yamlnode.IndexPath(path, i))
		}
		return expr.List(vals)
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && strings.Contains(n.Value, "${{"):
		v, err := expr.CompileTemplate(n.Value, nil)
		if err != nil {
			l.exprError(n, path, err)
			return expr.Literal(nil)
		}
		return v
	}
	v, _ := l.Value(n, path)
	return expr.Literal(v)
}

// check decodes an expected value: a literal, or a string holding ${{ }}
// (an expression over the run, see doc.go).
func (l *loader) check(n *yaml.Node, path string) *Check {
	n = yamlnode.Deref(n)
	c := &Check{Pos: l.pos(n)}
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && strings.Contains(n.Value, "${{") {
		v, err := expr.CompileTemplate(n.Value, nil)
		if err != nil {
			l.exprError(n, path, err)
			return nil
		}
		c.Expr, c.Source = v, n.Value
		return c
	}
	v, ok := l.Value(n, path)
	if !ok {
		return nil
	}
	c.Literal = v
	return c
}

// stringCheck is check for values that must be strings when literal.
func (l *loader) stringCheck(n *yaml.Node, path string, allowed ...string) *Check {
	c := l.check(n, path)
	if c == nil || c.Expr != nil {
		return c
	}
	s, ok := c.Literal.(string)
	if !ok {
		l.errf(n, path, "must be a string (got %s)", yamlnode.KindWord(n))
		return nil
	}
	if len(allowed) > 0 && !contains(allowed, s) {
		l.errf(n, path, "must be one of %s (got %q)", strings.Join(allowed, ", "), s)
		return nil
	}
	return c
}

// intCheck is check for values that must be integers when literal.
func (l *loader) intCheck(n *yaml.Node, path string) *Check {
	c := l.check(n, path)
	if c == nil || c.Expr != nil {
		return c
	}
	if _, ok := c.Literal.(int); !ok {
		l.errf(n, path, "must be an integer (got %s)", yamlnode.KindWord(n))
		return nil
	}
	return c
}

// exprError reports an expression compile error at its column when the
// scalar is on one line.
func (l *loader) exprError(n *yaml.Node, path string, err error) {
	p := l.pos(n)
	var ce *expr.CompileError
	if errors.As(err, &ce) && !strings.Contains(n.Value, "\n") {
		p.Col += ce.Offset
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			p.Col++
		}
	}
	l.diags = append(l.diags, playbook.Diagnostic{Pos: p, Path: path, Message: err.Error()})
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
