package playbook

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

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

// loader holds the state of one Parse: the diagnostics found so far.
type loader struct {
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

// parseYAML parses src into its document node. A syntax error is reported
// as a single diagnostic at the parser's position.
func (l *loader) parseYAML() *yaml.Node {
	var doc yaml.Node
	err := yaml.Load(l.src, &doc)
	if err == nil {
		return &doc
	}
	var le *yaml.LoadError
	if errors.As(err, &le) {
		p := Pos{File: l.file, Line: max(le.Mark.Line, 1), Col: max(le.Mark.Column, 1)}
		msg := le.Message
		if le.ContextMsg != "" {
			msg = le.ContextMsg + ": " + msg
		}
		if line := p.Line - 1; line < len(l.lines) && strings.HasPrefix(strings.TrimLeft(l.lines[line], " "), "\t") {
			msg += " (tabs cannot indent YAML; use spaces)"
		}
		l.errAt(p, "", "invalid YAML: %s", msg)
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.Contains(msg, "no documents") || strings.Contains(msg, "zero documents") {
		l.errAt(l.pos(nil), "", "empty playbook")
		return nil
	}
	l.errAt(l.pos(nil), "", "invalid YAML: %s", msg)
	return nil
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

// list decodes n as a sequence.
func (l *loader) list(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	n = yamlnode.Deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		l.errf(n, path, "must be a list (got %s)", yamlnode.KindWord(n))
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = yamlnode.Deref(c)
	}
	return out, true
}

// str decodes a string scalar.
func (l *loader) str(n *yaml.Node, path string) (string, bool) {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		l.errf(n, path, "must be a string (got %s)", yamlnode.KindWord(n))
		return "", false
	}
	return n.Value, true
}

// integer decodes an integer scalar.
func (l *loader) integer(n *yaml.Node, path string) (int, bool) {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		l.errf(n, path, "must be an integer (got %s)", yamlnode.KindWord(n))
		return 0, false
	}
	var v int
	if err := n.Load(&v); err != nil {
		l.errf(n, path, "integer %s is out of range", n.Value)
		return 0, false
	}
	return v, true
}

// number decodes an integer or float scalar.
func (l *loader) number(n *yaml.Node, path string) (float64, bool) {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		l.errf(n, path, "must be a number (got %s)", yamlnode.KindWord(n))
		return 0, false
	}
	var v float64
	if err := n.Load(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		l.errf(n, path, "must be a finite number (got %s)", n.Value)
		return 0, false
	}
	return v, true
}

// boolean decodes a boolean scalar.
func (l *loader) boolean(n *yaml.Node, path string) (bool, bool) {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		l.errf(n, path, "must be a boolean (got %s)", yamlnode.KindWord(n))
		return false, false
	}
	var v bool
	if err := n.Load(&v); err != nil {
		l.errf(n, path, "must be a boolean (got %s)", n.Value)
		return false, false
	}
	return v, true
}

// oneOf decodes a string that must be one of values.
func (l *loader) oneOf(n *yaml.Node, path string, values ...string) (string, bool) {
	s, ok := l.str(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(values, s) {
		l.errf(n, path, "must be one of %s (got %q)%s", strings.Join(values, ", "), s, suggest.Hint(s, values))
		return "", false
	}
	return s, true
}

// duration decodes a duration string: Go syntax ("90s", "1h30m") plus a
// whole-days prefix ("2d", "1d12h"). Negative durations are refused.
func (l *loader) duration(n *yaml.Node, path string) (time.Duration, bool) {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" || n.ShortTag() == "!!bool" {
		l.errf(n, path, "must be a duration (got %s); use e.g. 30s, 5m, 2h, 1d", yamlnode.KindWord(n))
		return 0, false
	}
	d, err := ParseDuration(n.Value)
	if err != nil {
		l.errf(n, path, "%v", err)
		return 0, false
	}
	return d, true
}

// ParseDuration parses a playbook duration: Go syntax ("30s", "1h30m") with
// an optional leading whole number of days ("2d", "1d12h"). It refuses
// negative values.
func ParseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid duration %q; use e.g. 30s, 5m, 2h, 1d", s)
	t := strings.TrimSpace(s)
	if t == "" || strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
		if strings.HasPrefix(t, "-") {
			return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
		}
		return 0, bad
	}
	var days int64
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		n, err := strconv.ParseInt(t[:i], 10, 64)
		if err != nil || n < 0 || n > int64(math.MaxInt64/(24*time.Hour)) {
			return 0, bad
		}
		days, t = n, t[i+1:]
	}
	var rest time.Duration
	if t != "" {
		var err error
		if rest, err = time.ParseDuration(t); err != nil {
			return 0, bad
		}
	} else if days == 0 && !strings.HasSuffix(strings.TrimSpace(s), "d") {
		return 0, bad
	}
	total := time.Duration(days) * 24 * time.Hour
	if rest > math.MaxInt64-total {
		return 0, fmt.Errorf("invalid duration %q: too long", s)
	}
	return total + rest, nil
}

// value converts a node to a JSON-like Go value: string, int, float64,
// bool, nil, []any, map[string]any.
func (l *loader) value(n *yaml.Node, path string) (any, bool) {
	n = yamlnode.Deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		o := yamlnode.Mapping(l.errf, n, path)
		if o == nil {
			return nil, false
		}
		m := make(map[string]any, len(o.Pairs))
		ok := true
		for _, p := range o.Pairs {
			v, vok := l.value(p.Val, yamlnode.KeyPath(path, p.Name))
			ok = ok && vok
			m[p.Name] = v
		}
		return m, ok
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := l.value(c, yamlnode.IndexPath(path, i))
			ok = ok && vok
			out[i] = v
		}
		return out, ok
	case yaml.ScalarNode:
		return l.scalar(n, path)
	}
	l.errf(n, path, "unsupported YAML node")
	return nil, false
}

// scalar converts a scalar node to its Go value.
func (l *loader) scalar(n *yaml.Node, path string) (any, bool) {
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Load(&b); err != nil {
			l.errf(n, path, "invalid boolean %q", n.Value)
			return nil, false
		}
		return b, true
	case "!!int":
		var i int
		if err := n.Load(&i); err == nil {
			return i, true
		}
		var f float64
		if err := n.Load(&f); err != nil {
			l.errf(n, path, "invalid integer %q", n.Value)
			return nil, false
		}
		return f, true
	case "!!float":
		var f float64
		if err := n.Load(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			l.errf(n, path, "must be a finite number (got %s)", n.Value)
			return nil, false
		}
		return f, true
	}
	// strings, timestamps, binary and custom tags keep their text.
	return n.Value, true
}
