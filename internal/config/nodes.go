package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/suggest"
)

// Caps on what a value may expand to (aliases followed).
const (
	maxNodes = 100_000
	maxDepth = 64
)

// loader holds the state of one Parse.
type loader struct {
	file  string
	src   []byte
	diags playbook.Diagnostics
	nodes int // value nodes visited, against maxNodes
}

func (l *loader) pos(n *yaml.Node) playbook.Pos {
	if n == nil {
		return playbook.Pos{File: l.file, Line: 1, Col: 1}
	}
	return playbook.Pos{File: l.file, Line: n.Line, Col: n.Column}
}

func (l *loader) errf(n *yaml.Node, path, format string, args ...any) {
	l.diags = append(l.diags, playbook.Diagnostic{Pos: l.pos(n), Path: path, Message: fmt.Sprintf(format, args...)})
}

// parseYAML parses src into its root node; nil with a diagnostic on a
// syntax error, nil without one for an empty document.
func (l *loader) parseYAML() *yaml.Node {
	var doc yaml.Node
	err := yaml.Load(l.src, &doc)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "no documents") || strings.Contains(msg, "zero documents") {
			return nil // an empty file: every default
		}
		var le *yaml.LoadError
		if errors.As(err, &le) {
			p := playbook.Pos{File: l.file, Line: max(le.Mark.Line, 1), Col: max(le.Mark.Column, 1)}
			msg := le.Message
			if le.ContextMsg != "" {
				msg = le.ContextMsg + ": " + msg
			}
			l.diags = append(l.diags, playbook.Diagnostic{Pos: p, Message: "invalid YAML: " + msg})
			return nil
		}
		l.errf(nil, "", "invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	if isNull(root) {
		return nil
	}
	return root
}

// deref follows aliases, giving up on cycles.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindWord names what a node holds, for "must be X (got Y)".
func kindWord(n *yaml.Node) string {
	n = deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "string"
		case "!!int":
			return "integer"
		case "!!float":
			return "number"
		case "!!bool":
			return "boolean"
		case "!!null":
			return "null"
		}
		return strings.TrimPrefix(n.ShortTag(), "!!")
	}
	return "an alias"
}

// pair is one key/value of a mapping.
type pair struct {
	name     string
	key, val *yaml.Node
}

// object is a decoded mapping: its pairs in order and by name.
type object struct {
	node  *yaml.Node
	pairs []pair
	byKey map[string]pair
}

// get returns the value of key, nil when absent or null.
func (o *object) get(key string) *yaml.Node {
	p, ok := o.byKey[key]
	if !ok || isNull(p.val) {
		return nil
	}
	return deref(p.val)
}

// mapping decodes n as a mapping with unique scalar keys; `<<` merge keys
// are honoured (explicit keys win).
func (l *loader) mapping(n *yaml.Node, path string) *object {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		l.errf(n, path, "must be a mapping (got %s)", kindWord(n))
		return nil
	}
	o := &object{node: n, byKey: map[string]pair{}}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kd := deref(k)
		if kd.Kind != yaml.ScalarNode {
			l.errf(k, path, "mapping keys must be strings (got %s)", kindWord(kd))
			continue
		}
		if kd.ShortTag() == "!!merge" {
			merged = append(merged, l.mergeSources(v, path)...)
			continue
		}
		if prev, dup := o.byKey[kd.Value]; dup {
			l.errf(k, keyPath(path, kd.Value), "duplicate key %q (first at line %d)", kd.Value, prev.key.Line)
			continue
		}
		p := pair{name: kd.Value, key: k, val: v}
		o.byKey[p.name] = p
		o.pairs = append(o.pairs, p)
	}
	for _, p := range merged {
		if _, ok := o.byKey[p.name]; !ok {
			o.byKey[p.name] = p
			o.pairs = append(o.pairs, p)
		}
	}
	return o
}

// mergeSources returns the pairs a `<<` value brings in.
func (l *loader) mergeSources(v *yaml.Node, path string) []pair {
	v = deref(v)
	var srcs []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{v}
	case yaml.SequenceNode:
		srcs = v.Content
	default:
		l.errf(v, path, "<< must merge a mapping or a list of mappings (got %s)", kindWord(v))
		return nil
	}
	var out []pair
	seen := map[string]bool{}
	for _, s := range srcs {
		if o := l.mapping(s, path); o != nil {
			for _, p := range o.pairs {
				if !seen[p.name] {
					seen[p.name] = true
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// strict decodes n as a mapping whose keys must be among known. At the
// top level (path "") keys starting with "x-" are allowed: they hold
// anchors for reuse.
func (l *loader) strict(n *yaml.Node, path string, known ...string) *object {
	o := l.mapping(n, path)
	if o == nil {
		return nil
	}
	for _, p := range o.pairs {
		if path == "" && strings.HasPrefix(p.name, "x-") {
			continue
		}
		if !contains(known, p.name) {
			l.errf(p.key, keyPath(path, p.name), "unknown key %q%s", p.name, suggest.Hint(p.name, known))
		}
	}
	return o
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// str decodes a string scalar.
func (l *loader) str(n *yaml.Node, path string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		l.errf(n, path, "must be a string (got %s)", kindWord(n))
		return "", false
	}
	return n.Value, true
}

// nonEmpty decodes a string that must not be empty.
func (l *loader) nonEmpty(n *yaml.Node, path string) (string, bool) {
	s, ok := l.str(n, path)
	if ok && strings.TrimSpace(s) == "" {
		l.errf(n, path, "must not be empty")
		return "", false
	}
	return s, ok
}

// boolean decodes a boolean scalar.
func (l *loader) boolean(n *yaml.Node, path string) (bool, bool) {
	n = deref(n)
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Load(&v) != nil {
		l.errf(n, path, "must be a boolean (got %s)", kindWord(n))
		return false, false
	}
	return v, true
}

// duration decodes a duration of at least lo.
func (l *loader) duration(n *yaml.Node, path string, lo time.Duration) (time.Duration, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!bool" {
		l.errf(n, path, "must be a duration (got %s); use e.g. 30s, 5m, 2h, 7d", kindWord(n))
		return 0, false
	}
	d, err := playbook.ParseDuration(n.Value)
	if err != nil {
		l.errf(n, path, "%v", err)
		return 0, false
	}
	switch {
	case lo == 0 && d <= 0:
		l.errf(n, path, "must be longer than 0s")
		return 0, false
	case d < lo:
		l.errf(n, path, "must be at least %s (got %s)", lo, d)
		return 0, false
	}
	return d, true
}

// size decodes a byte size between lo and hi.
func (l *loader) size(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!str") {
		l.errf(n, path, "must be a size (got %s); use bytes or e.g. 512KiB, 1MiB", kindWord(n))
		return 0, false
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		l.errf(n, path, "%v", err)
		return 0, false
	}
	if v < lo || v > hi {
		l.errf(n, path, "must be between %s and %s (got %s)", FormatSize(lo), FormatSize(hi), n.Value)
		return 0, false
	}
	return v, true
}

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	"kb": 1000, "mb": 1000 * 1000, "gb": 1000 * 1000 * 1000,
}

// ParseSize parses a byte size: a whole number of bytes, or a whole number
// with a unit (B, KiB, MiB, GiB: 1024-based; KB, MB, GB: 1000-based;
// case-insensitive, a space allowed before the unit).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if i == 0 || !ok {
		return 0, fmt.Errorf("invalid size %q; use bytes or e.g. 512KiB, 1MiB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n * unit, nil
}

// FormatSize prints n in the largest binary unit that divides it.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// value converts a connection setting to a Go value: string, int,
// float64, bool, nil or map[string]any. Lists are refused.
func (l *loader) value(n *yaml.Node, path string, depth int) (any, bool) {
	n = deref(n)
	l.nodes++
	if l.nodes > maxNodes || depth > maxDepth {
		if l.nodes == maxNodes+1 || depth == maxDepth+1 {
			l.errf(n, path, "value is too large or too deeply nested")
		}
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		o := l.mapping(n, path)
		if o == nil {
			return nil, false
		}
		m := make(map[string]any, len(o.pairs))
		ok := true
		for _, p := range o.pairs {
			v, vok := l.value(p.val, keyPath(path, p.name), depth+1)
			ok = ok && vok
			m[p.name] = v
		}
		return m, ok
	case yaml.ScalarNode:
		return l.scalar(n, path)
	}
	l.errf(n, path, "must be a string, number, boolean or mapping (got %s)", kindWord(n))
	return nil, false
}

// scalar converts a scalar node to its Go value. A string holding `${{`
// must be exactly one secret reference.
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
		if err := n.Load(&i); err != nil {
			l.errf(n, path, "integer %s is out of range", n.Value)
			return nil, false
		}
		return i, true
	case "!!float":
		var f float64
		if err := n.Load(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			l.errf(n, path, "must be a finite number (got %s)", n.Value)
			return nil, false
		}
		return f, true
	}
	if strings.Contains(n.Value, "${{") {
		if _, ok := secretRef(n.Value); !ok {
			l.errf(n, path, "only ${{ secrets.NAME }} is allowed in the config (got %q)", n.Value)
			return nil, false
		}
	}
	return n.Value, true
}

// keyPath appends a map key, quoting it when it is not a plain name.
func keyPath(path, key string) string {
	if !plainName(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r != '_' && r != '-' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
