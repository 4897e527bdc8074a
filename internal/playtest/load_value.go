package playtest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/yamlnode"
)

// loader holds the state of one Load: the diagnostics found so far.
type loader struct {
	file  string
	diags playbook.Diagnostics
	pb    *playbook.Playbook
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

func (l *loader) strict(n *yaml.Node, path string, known ...string) *yamlnode.Object {
	return yamlnode.Strict(l.errf, n, path, known...)
}

// str decodes a string scalar.
func (l *loader) str(n *yaml.Node, path string) (string, bool) {
	n = yamlnode.Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		l.errf(n, path, "must be a string (got %s)", yamlnode.KindWord(n))
		return "", false
	}
	return n.Value, true
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

// integer decodes an integer scalar within [lo, hi].
func (l *loader) integer(n *yaml.Node, path string, lo, hi int) (int, bool) {
	n = yamlnode.Deref(n)
	var v int
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		l.errf(n, path, "must be an integer (got %s)", yamlnode.KindWord(n))
		return 0, false
	}
	if v < lo || v > hi {
		l.errf(n, path, "must be between %d and %d (got %d)", lo, hi, v)
		return 0, false
	}
	return v, true
}

// number decodes a positive number.
func (l *loader) number(n *yaml.Node, path string) (float64, bool) {
	n = yamlnode.Deref(n)
	var v float64
	tag := ""
	if n != nil {
		tag = n.ShortTag()
	}
	if n == nil || n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil {
		l.errf(n, path, "must be a number (got %s)", yamlnode.KindWord(n))
		return 0, false
	}
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		l.errf(n, path, "must be more than 0 (got %v)", v)
		return 0, false
	}
	return v, true
}

func (l *loader) boolean(n *yaml.Node, path string) (bool, bool) {
	n = yamlnode.Deref(n)
	var v bool
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		l.errf(n, path, "must be true or false (got %s)", yamlnode.KindWord(n))
		return false, false
	}
	return v, true
}

// duration decodes a duration like 30s, 5m or 2d.
func (l *loader) duration(n *yaml.Node, path string) (time.Duration, bool) {
	s, ok := l.str(n, path)
	if !ok {
		return 0, false
	}
	d, err := playbook.ParseDuration(s)
	if err != nil || d < 0 {
		l.errf(n, path, "must be a duration like 30s, 5m or 2d (got %q)", s)
		return 0, false
	}
	return d, true
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

// value decodes any YAML value to plain Go values (maps with string keys).
func (l *loader) value(n *yaml.Node, path string) (any, bool) {
	var v any
	if err := yamlnode.Deref(n).Decode(&v); err != nil {
		l.errf(n, path, "cannot decode: %v", err)
		return nil, false
	}
	return plain(v), true
}

// plain turns YAML-decoded values into the shapes JSON decoding gives
// (map[string]any, []any), so that comparisons see one representation.
func plain(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = plain(e)
		}
		return t
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = plain(e)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = plain(e)
		}
		return t
	}
	return v
}

// mapping returns the pairs of a mapping node (nil when it is not one).
func (l *loader) mapping(n *yaml.Node, path string) []yamlnode.Pair {
	o := yamlnode.Mapping(l.errf, n, path)
	if o == nil {
		return nil
	}
	return o.Pairs
}

// list returns the elements of a sequence node.
func (l *loader) list(n *yaml.Node, path string) []*yaml.Node {
	n = yamlnode.Deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		l.errf(n, path, "must be a list (got %s)", yamlnode.KindWord(n))
		return nil
	}
	return n.Content
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
	v, _ := l.value(n, path)
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
	v, ok := l.value(n, path)
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
