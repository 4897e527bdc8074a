package playbook

import (
	"errors"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/yamlnode"
)

// compiled is a compiled value and what the params check sees of it: the
// literal Go value, or steps.Dynamic{} where an expression decides.
type compiled struct {
	val   expr.Value
	check any
}

// compileValue compiles a `with`-like value: strings are templates, other
// scalars literals, mappings and lists compiled element by element (the
// written key order is kept).
func (l *loader) compileValue(n *yaml.Node, path string, te *expr.TypeEnv) (compiled, bool) {
	n = yamlnode.Deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		o := yamlnode.Mapping(l.errf, n, path)
		if o == nil {
			return compiled{}, false
		}
		keys := make([]string, 0, len(o.Pairs))
		vals := make([]expr.Value, 0, len(o.Pairs))
		check := make(map[string]any, len(o.Pairs))
		ok := true
		for _, p := range o.Pairs {
			c, cok := l.compileValue(p.Val, yamlnode.KeyPath(path, p.Name), te)
			if !cok {
				ok = false
				continue
			}
			keys, vals = append(keys, p.Name), append(vals, c.val)
			check[p.Name] = c.check
		}
		return compiled{val: expr.Map(keys, vals), check: check}, ok
	case yaml.SequenceNode:
		vals := make([]expr.Value, 0, len(n.Content))
		check := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			cv, cok := l.compileValue(c, yamlnode.IndexPath(path, i), te)
			if !cok {
				ok = false
				continue
			}
			vals, check = append(vals, cv.val), append(check, cv.check)
		}
		return compiled{val: expr.List(vals), check: check}, ok
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			v, ok := l.template(n, path, te)
			if !ok {
				return compiled{}, false
			}
			if !v.Literal() {
				return compiled{val: v, check: steps.Dynamic{}}, true
			}
			lit, _ := v.Eval(nil)
			return compiled{val: v, check: lit}, true
		}
		x, ok := l.Scalar(n, path)
		if !ok {
			return compiled{}, false
		}
		return compiled{val: expr.Literal(x), check: x}, true
	}
	l.errf(n, path, "unsupported YAML node")
	return compiled{}, false
}

// template compiles a string scalar as a template.
// A node reached again through an alias under the same environment reuses
// its compiled value, so aliases cannot multiply compile work.
func (l *loader) template(n *yaml.Node, path string, te *expr.TypeEnv) (expr.Value, bool) {
	key := tplKey{n, te}
	if v, ok := l.tpls[key]; ok {
		return v, v != nil
	}
	if l.tpls == nil {
		l.tpls = map[tplKey]expr.Value{}
	}
	v, err := expr.CompileTemplate(n.Value, te)
	if err != nil {
		l.tpls[key] = nil
		l.exprError(n, path, err)
		return nil, false
	}
	l.tpls[key] = v
	l.noteRefs(v.Refs())
	return v, true
}

type tplKey struct {
	n  *yaml.Node
	te *expr.TypeEnv
}

// program compiles an `if:`-like scalar: bare or one ${{ }}. Booleans are
// accepted (`if: false`).
func (l *loader) program(n *yaml.Node, path string, te *expr.TypeEnv) *expr.Program {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && n.ShortTag() != "!!bool") {
		l.errf(n, path, "must be an expression (got %s)", yamlnode.KindWord(n))
		return nil
	}
	p, err := expr.Compile(n.Value, te)
	if err != nil {
		l.exprError(n, path, err)
		return nil
	}
	l.noteRefs(p.Refs())
	return p
}

// forEach compiles `for_each:`: a literal list, or an expression (bare or
// ${{ }}) that yields a list or map.
func (l *loader) forEach(n *yaml.Node, path string, te *expr.TypeEnv) expr.Value {
	n = yamlnode.Deref(n)
	switch {
	case n.Kind == yaml.SequenceNode:
		c, ok := l.compileValue(n, path, te)
		if !ok {
			return nil
		}
		return c.val
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		src := strings.TrimSpace(n.Value)
		if strings.HasPrefix(src, "${{") {
			v, ok := l.template(n, path, te)
			if !ok {
				return nil
			}
			return v
		}
		// A bare expression: wrap it so the value keeps its type, and shift
		// error offsets back over the added "${{ ".
		v, err := expr.CompileTemplate("${{ "+n.Value+" }}", te)
		if err != nil {
			var ce *expr.CompileError
			if errors.As(err, &ce) { // one part: one error
				err = &expr.CompileError{Offset: max(ce.Offset-4, 0), Msg: ce.Msg}
			}
			l.exprError(n, path, err)
			return nil
		}
		l.noteRefs(v.Refs())
		return v
	}
	l.errf(n, path, "must be a list or an expression (got %s)", yamlnode.KindWord(n))
	return nil
}

// exprError reports a compile error at its position inside the scalar;
// each of joined errors (a template's parts) at its own.
func (l *loader) exprError(n *yaml.Node, path string, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			l.exprError(n, path, e)
		}
		return
	}
	var ce *expr.CompileError
	if errors.As(err, &ce) {
		l.errAt(l.offsetPos(n, ce.Offset), path, "%s", ce.Msg)
		return
	}
	l.errf(n, path, "%v", err)
}

// offsetPos maps a byte offset of a scalar's value to a file position.
//
//   - plain single-line scalars: exact (column + offset);
//   - quoted single-line scalars: column + 1 + offset, exact unless an
//     escape sequence comes before the offset;
//   - literal blocks (|): exact, using the block's indentation;
//   - folded blocks (>) and multi-line flow scalars: the line is found by
//     counting line breaks in the value, which folding may shift; best
//     effort.
func (l *loader) offsetPos(n *yaml.Node, off int) Pos {
	p := l.pos(n)
	if off < 0 || off > len(n.Value) {
		return p
	}
	before := n.Value[:off]
	nl := strings.Count(before, "\n")
	switch n.Style & (yaml.LiteralStyle | yaml.FoldedStyle | yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle) {
	case yaml.LiteralStyle, yaml.FoldedStyle:
		line := n.Line + 1 + nl
		col := off - (strings.LastIndex(before, "\n") + 1)
		return Pos{File: l.file, Line: line, Col: l.blockIndent(n.Line) + 1 + col}
	case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
		if nl == 0 {
			p.Col += 1 + off
			return p
		}
	default:
		if nl == 0 {
			p.Col += off
			return p
		}
	}
	// Multi-line flow scalar: the next lines are indented like their
	// source line; find it and take its indentation.
	line := n.Line + nl
	col := off - (strings.LastIndex(before, "\n") + 1)
	return Pos{File: l.file, Line: line, Col: l.lineIndent(line) + 1 + col}
}

// blockIndent returns the indentation of the first non-blank line after
// the block scalar header at line.
func (l *loader) blockIndent(line int) int {
	for i := line; i < len(l.lines); i++ { // l.lines[line] is the line after
		s := strings.TrimRight(l.lines[i], "\r")
		if strings.TrimSpace(s) == "" {
			continue
		}
		return len(s) - len(strings.TrimLeft(s, " "))
	}
	return 0
}

// lineIndent returns the indentation of a 1-based source line.
func (l *loader) lineIndent(line int) int {
	if line < 1 || line > len(l.lines) {
		return 0
	}
	s := l.lines[line-1]
	return len(s) - len(strings.TrimLeft(s, " \t"))
}

// noteRefs records the secrets expressions reference.
func (l *loader) noteRefs(refs []expr.Ref) {
	for _, r := range refs {
		if r.Kind == "secret" && r.Name != "" {
			if l.secrets == nil {
				l.secrets = map[string]bool{}
			}
			l.secrets[r.Name] = true
		}
	}
}

// secretList returns the referenced secrets, sorted.
func (l *loader) secretList() []string {
	if len(l.secrets) == 0 {
		return nil
	}
	return sortedKeys(l.secrets)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
