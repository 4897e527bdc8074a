package expr

import (
	"errors"
	"fmt"
	"strings"
)

// CompileTemplate compiles a string that may contain ${{ }} parts. A string
// without any is a literal Value; a string that is exactly one ${{ }} is a
// whole-value template whose Eval keeps the expression's type; anything
// else interpolates to a string. `$${{` writes a literal `${{`. Every
// ${{ }} part is compiled: the error is a *CompileError, or, when several
// parts have one, their join (errors.Join) of each part's first.
func CompileTemplate(s string, te *TypeEnv) (Value, error) {
	parts, err := SplitTemplate(s)
	if err != nil {
		return nil, err
	}
	t := &template{}
	lit := ""
	var errs []error
	for _, pt := range parts {
		if !pt.IsExpr {
			lit = pt.Lit
			continue
		}
		p, err := compileExpr(pt.Expr, pt.Offset+3, te)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(parts) == 1 {
			return &whole{p}, nil
		}
		t.lits = append(t.lits, lit)
		t.progs = append(t.progs, p)
		lit = ""
	}
	switch len(errs) {
	case 0:
	case 1:
		return nil, errs[0]
	default:
		return nil, errors.Join(errs...)
	}
	if len(t.progs) == 0 {
		return literal{lit}, nil
	}
	t.lits = append(t.lits, lit)
	return t, nil
}

// TemplatePart is one piece of a template: literal text (with `$${{`
// already read as `${{`), or one ${{ }} part: its source between the
// braces and the byte offset of its `${{`.
type TemplatePart struct {
	Lit    string
	IsExpr bool
	Expr   string
	Offset int
}

// SplitTemplate cuts s into its literal text and ${{ }} parts, in order;
// no two literal parts are adjacent. A template that is exactly one ${{ }}
// is one part. It checks the limits (MaxTemplateLen, MaxTemplateParts) and
// that every ${{ is closed, not the expressions.
func SplitTemplate(s string) ([]TemplatePart, error) {
	if len(s) > MaxTemplateLen {
		return nil, tooExpensive(0, "template is %d bytes (limit %d)", len(s), MaxTemplateLen)
	}
	if !strings.Contains(s, "${{") {
		return []TemplatePart{{Lit: s}}, nil
	}
	var parts []TemplatePart
	var lit strings.Builder
	exprs := 0
	i := 0
	for {
		j := strings.Index(s[i:], "${{")
		if j < 0 {
			lit.WriteString(s[i:])
			break
		}
		pos := i + j
		if pos > 0 && s[pos-1] == '$' {
			lit.WriteString(s[i : pos-1])
			lit.WriteString("${{")
			i = pos + 3
			continue
		}
		lit.WriteString(s[i:pos])
		end := findClose(s, pos+3)
		if end < 0 {
			return nil, &CompileError{Offset: pos, Msg: "unterminated ${{ (no matching }})"}
		}
		if exprs == MaxTemplateParts {
			return nil, tooExpensive(pos, "more than %d ${{ }} parts", MaxTemplateParts)
		}
		exprs++
		if lit.Len() > 0 {
			parts = append(parts, TemplatePart{Lit: lit.String()})
			lit.Reset()
		}
		parts = append(parts, TemplatePart{IsExpr: true, Expr: s[pos+3 : end], Offset: pos})
		i = end + 2
	}
	if lit.Len() > 0 || len(parts) == 0 {
		parts = append(parts, TemplatePart{Lit: lit.String()})
	}
	return parts, nil
}

// findClose returns the index of the "}}" that ends the expression
// starting at from, skipping string literals and balanced braces (map
// literals), or -1.
func findClose(s string, from int) int {
	depth := 0
	for i := from; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return -1
			}
		case '`':
			k := strings.IndexByte(s[i+1:], '`')
			if k < 0 {
				return -1
			}
			i += k + 1
		case '{':
			depth++
		case '}':
			if depth == 0 && i+1 < len(s) && s[i+1] == '}' {
				return i
			}
			if depth > 0 {
				depth--
			}
		}
	}
	return -1
}

// whole is a template that is exactly one ${{ }}.
type whole struct{ p *Program }

func (w *whole) Eval(s *Scope) (any, error) { return w.p.Eval(s) }
func (w *whole) Literal() bool              { return false }
func (w *whole) Refs() []Ref                { return w.p.Refs() }

// template interpolates: lits[0] progs[0] lits[1] ... lits[n].
type template struct {
	lits  []string
	progs []*Program
}

func (t *template) Eval(s *Scope) (any, error) { return t.eval(s, nil) }

// eval interpolates; with d it appends what derives from a secret (see
// EvalDerived): the leaves of a tainted part, and its rendering when it is
// not a string.
func (t *template) eval(s *Scope, d *[]string) (any, error) {
	var b strings.Builder
	for i, p := range t.progs {
		b.WriteString(t.lits[i])
		v, err := p.Eval(s)
		if err != nil {
			return nil, err
		}
		at := b.Len()
		if err := render(&b, v, MaxOutputBytes-b.Len()); err != nil {
			return nil, &EvalError{Expr: p.src, Msg: err.Error(), err: err}
		}
		if d != nil && p.tainted(s) {
			p.leaves(v, d)
			if _, isString := v.(string); !isString {
				p.leaves(b.String()[at:], d)
			}
		}
	}
	b.WriteString(t.lits[len(t.lits)-1])
	if b.Len() > MaxOutputBytes {
		return nil, &EvalError{Expr: t.progs[0].src, Msg: fmt.Sprintf("%v: template renders to more than %d bytes", ErrTooExpensive, MaxOutputBytes), err: ErrTooExpensive}
	}
	return b.String(), nil
}

func (t *template) Literal() bool { return false }

func (t *template) Refs() []Ref {
	var refs []Ref
	for _, p := range t.progs {
		refs = append(refs, p.refs...)
	}
	return dedupRefs(refs)
}

// Literal wraps a plain value (from YAML) as a Value. Eval returns v
// itself: callers must not modify it.
func Literal(v any) Value { return literal{v} }

type literal struct{ v any }

func (l literal) Eval(*Scope) (any, error) { return l.v, nil }
func (l literal) Literal() bool            { return true }
func (l literal) Refs() []Ref              { return nil }

// Map builds a map Value; List a list Value. Their Eval evaluates every
// element and returns map[string]any or []any.
func Map(keys []string, vals []Value) Value {
	if len(keys) != len(vals) {
		panic(fmt.Sprintf("expr.Map: %d keys and %d values", len(keys), len(vals)))
	}
	return &mapValue{keys: keys, vals: vals}
}

func List(vals []Value) Value { return &listValue{vals: vals} }

type mapValue struct {
	keys []string
	vals []Value
}

func (m *mapValue) Eval(s *Scope) (any, error) {
	out := make(map[string]any, len(m.keys))
	for i, k := range m.keys {
		v, err := m.vals[i].Eval(s)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func (m *mapValue) Literal() bool { return allLiteral(m.vals) }
func (m *mapValue) Refs() []Ref   { return allRefs(m.vals) }

type listValue struct{ vals []Value }

func (l *listValue) Eval(s *Scope) (any, error) {
	out := make([]any, len(l.vals))
	for i, v := range l.vals {
		x, err := v.Eval(s)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

func (l *listValue) Literal() bool { return allLiteral(l.vals) }
func (l *listValue) Refs() []Ref   { return allRefs(l.vals) }

func allLiteral(vals []Value) bool {
	for _, v := range vals {
		if !v.Literal() {
			return false
		}
	}
	return true
}

func allRefs(vals []Value) []Ref {
	var refs []Ref
	for _, v := range vals {
		refs = append(refs, v.Refs()...)
	}
	return dedupRefs(refs)
}
