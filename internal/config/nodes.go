package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/yamlnode"
)

// Caps on what a value may expand to (aliases followed).
const (
	maxNodes = 100_000
	maxDepth = 64
)

// loader holds the state of one Parse. Its Reader reports through errf.
type loader struct {
	yamlnode.Reader
	file  string
	src   []byte
	diags playbook.Diagnostics
	nodes int // value nodes visited, against maxNodes
}

// newLoader starts the Parse of src, named file in positions.
func newLoader(file string, src []byte) *loader {
	l := &loader{file: file, src: src}
	l.Reader = yamlnode.Reader{Errorf: l.errf}
	return l
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
	doc, se := yamlnode.Load(l.src)
	if se != nil {
		l.diags = append(l.diags, playbook.Diagnostic{Pos: playbook.Pos{File: l.file, Line: se.Line, Col: se.Col}, Message: se.Message})
		return nil
	}
	root := yamlnode.Root(doc)
	if yamlnode.IsNull(root) {
		return nil
	}
	return root
}

// nonEmpty decodes a string that must not be empty.
func (l *loader) nonEmpty(n *yaml.Node, path string) (string, bool) {
	s, ok := l.Str(n, path)
	if ok && strings.TrimSpace(s) == "" {
		l.errf(n, path, "must not be empty")
		return "", false
	}
	return s, ok
}

// duration decodes a duration of at least lo.
func (l *loader) duration(n *yaml.Node, path string, lo time.Duration) (time.Duration, bool) {
	d, ok := l.Duration(n, path, "30s, 5m, 2h, 7d")
	switch {
	case !ok:
		return 0, false
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
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!str") {
		l.errf(n, path, "must be a size (got %s); use bytes or e.g. 512KiB, 1MiB", yamlnode.KindWord(n))
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
	n = yamlnode.Deref(n)
	l.nodes++
	if l.nodes > maxNodes || depth > maxDepth {
		if l.nodes == maxNodes+1 || depth == maxDepth+1 {
			l.errf(n, path, "value is too large or too deeply nested")
		}
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		o := yamlnode.Mapping(l.errf, n, path)
		if o == nil {
			return nil, false
		}
		m := make(map[string]any, len(o.Pairs))
		ok := true
		for _, p := range o.Pairs {
			v, vok := l.value(p.Val, yamlnode.KeyPath(path, p.Name), depth+1)
			ok = ok && vok
			m[p.Name] = v
		}
		return m, ok
	case yaml.ScalarNode:
		return l.scalar(n, path)
	}
	l.errf(n, path, "must be a string, number, boolean or mapping (got %s)", yamlnode.KindWord(n))
	return nil, false
}

// scalar converts a scalar node to its Go value (Reader.Scalar). A
// string holding `${{` must be exactly one secret reference.
func (l *loader) scalar(n *yaml.Node, path string) (any, bool) {
	v, ok := l.Scalar(n, path)
	if s, isStr := v.(string); ok && isStr && strings.Contains(s, "${{") {
		if _, ok := secretRef(s); !ok {
			l.errf(n, path, "only ${{ secrets.NAME }} is allowed in the config (got %q)", s)
			return nil, false
		}
	}
	return v, ok
}
