package yamlnode

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"
)

// SyntaxError is a source Load could not parse, at the parser's position.
type SyntaxError struct {
	Line, Col int    // 1-based
	Message   string // "invalid YAML: context: problem"
}

// Load parses src into its document node; nil, and no error, when src
// holds no document. A syntax error names the parser's context, and says
// when a tab indents the line it stopped at.
func Load(src []byte) (*yaml.Node, *SyntaxError) {
	var doc yaml.Node
	err := yaml.Load(src, &doc)
	if err == nil {
		return &doc, nil
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.Contains(msg, "no documents") || strings.Contains(msg, "zero documents") {
		return nil, nil
	}
	var le *yaml.LoadError
	if errors.As(err, &le) {
		se := &SyntaxError{Line: max(le.Mark.Line, 1), Col: max(le.Mark.Column, 1), Message: le.Message}
		if le.ContextMsg != "" {
			se.Message = le.ContextMsg + ": " + se.Message
		}
		if lines := strings.Split(string(src), "\n"); se.Line <= len(lines) && strings.HasPrefix(strings.TrimLeft(lines[se.Line-1], " "), "\t") {
			se.Message += " (tabs cannot indent YAML; use spaces)"
		}
		se.Message = "invalid YAML: " + se.Message
		return nil, se
	}
	return nil, &SyntaxError{Line: 1, Col: 1, Message: "invalid YAML: " + msg}
}

// Root returns the content of a document node Load returned: nil when
// there is none.
func Root(doc *yaml.Node) *yaml.Node {
	if doc == nil || doc.Kind != yaml.DocumentNode {
		return doc
	}
	if len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// Reader reads typed values out of the nodes of one document, reporting
// each value it cannot read through Errorf, at its node, under its
// diagnostic path. The playbook, config and test-file loaders read
// through it, so one kind of mistake reads the same in each.
type Reader struct {
	Errorf Errorf
}

// Mapping is Mapping with the reader's Errorf.
func (r Reader) Mapping(n *yaml.Node, path string) *Object { return Mapping(r.Errorf, n, path) }

// Strict is Strict with the reader's Errorf.
func (r Reader) Strict(n *yaml.Node, path string, known ...string) *Object {
	return Strict(r.Errorf, n, path, known...)
}

// List reads a sequence, its elements dereferenced.
func (r Reader) List(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		r.Errorf(n, path, "must be a list (got %s)", KindWord(n))
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = Deref(c)
	}
	return out, true
}

// Str reads a string scalar.
func (r Reader) Str(n *yaml.Node, path string) (string, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		r.Errorf(n, path, "must be a string (got %s)", KindWord(n))
		return "", false
	}
	return n.Value, true
}

// Int reads an integer scalar.
func (r Reader) Int(n *yaml.Node, path string) (int, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		r.Errorf(n, path, "must be an integer (got %s)", KindWord(n))
		return 0, false
	}
	var v int
	if err := n.Load(&v); err != nil {
		r.Errorf(n, path, "integer %s is out of range", n.Value)
		return 0, false
	}
	return v, true
}

// IntBetween reads an integer scalar within [lo, hi].
func (r Reader) IntBetween(n *yaml.Node, path string, lo, hi int) (int, bool) {
	v, ok := r.Int(n, path)
	if ok && (v < lo || v > hi) {
		r.Errorf(n, path, "must be between %d and %d (got %d)", lo, hi, v)
		return 0, false
	}
	return v, ok
}

// Number reads a finite integer or float scalar.
func (r Reader) Number(n *yaml.Node, path string) (float64, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		r.Errorf(n, path, "must be a number (got %s)", KindWord(n))
		return 0, false
	}
	var v float64
	if err := n.Load(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		r.Errorf(n, path, "must be a finite number (got %s)", n.Value)
		return 0, false
	}
	return v, true
}

// Bool reads a boolean scalar.
func (r Reader) Bool(n *yaml.Node, path string) (bool, bool) {
	n = Deref(n)
	var v bool
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Load(&v) != nil {
		r.Errorf(n, path, "must be a boolean (got %s)", KindWord(n))
		return false, false
	}
	return v, true
}

// Duration reads a duration (ParseDuration); examples, in the message of
// a value that is no duration at all, suit the field ("30s, 5m, 2h, 1d").
func (r Reader) Duration(n *yaml.Node, path, examples string) (time.Duration, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" || n.ShortTag() == "!!bool" {
		r.Errorf(n, path, "must be a duration (got %s); use e.g. %s", KindWord(n), examples)
		return 0, false
	}
	d, err := ParseDuration(n.Value)
	if err != nil {
		r.Errorf(n, path, "%v", err)
		return 0, false
	}
	return d, true
}

// Value reads any node as a JSON-like Go value: string, int, float64,
// bool, nil, []any, map[string]any. Strings, timestamps and custom tags
// keep their text; an integer too large for an int is a float64.
func (r Reader) Value(n *yaml.Node, path string) (any, bool) {
	n = Deref(n)
	switch {
	case n == nil:
		return nil, true
	case n.Kind == yaml.MappingNode:
		o := r.Mapping(n, path)
		if o == nil {
			return nil, false
		}
		m := make(map[string]any, len(o.Pairs))
		ok := true
		for _, p := range o.Pairs {
			v, vok := r.Value(p.Val, KeyPath(path, p.Name))
			ok = ok && vok
			m[p.Name] = v
		}
		return m, ok
	case n.Kind == yaml.SequenceNode:
		out := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := r.Value(c, IndexPath(path, i))
			ok = ok && vok
			out[i] = v
		}
		return out, ok
	case n.Kind == yaml.ScalarNode:
		return r.Scalar(n, path)
	}
	r.Errorf(n, path, "unsupported YAML node")
	return nil, false
}

// Scalar reads a scalar node as its Go value (see Value).
func (r Reader) Scalar(n *yaml.Node, path string) (any, bool) {
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Load(&b); err != nil {
			r.Errorf(n, path, "invalid boolean %q", n.Value)
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
			r.Errorf(n, path, "invalid integer %q", n.Value)
			return nil, false
		}
		return f, true
	case "!!float":
		var f float64
		if err := n.Load(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			r.Errorf(n, path, "must be a finite number (got %s)", n.Value)
			return nil, false
		}
		return f, true
	}
	return n.Value, true
}

// ParseDuration parses a duration as playbooks, the config and test
// files write it: Go syntax ("30s", "1h30m") with an optional leading
// whole number of days ("2d", "1d12h"). It refuses negative values.
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
