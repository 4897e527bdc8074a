package playbook

import (
	"fmt"
	"sort"
	"strings"
)

// String formats p as file:line:col (file omitted when empty).
func (p Pos) String() string {
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Diagnostic is one problem found while loading a playbook. Path is the
// place in the document ("steps[2].with.node_count"), "" for the whole file.
type Diagnostic struct {
	Pos     Pos
	Path    string
	Message string
}

// String formats d like a compiler: `file:line:col: path: message`.
func (d Diagnostic) String() string {
	if d.Path == "" {
		return d.Pos.String() + ": " + d.Message
	}
	return d.Pos.String() + ": " + d.Path + ": " + d.Message
}

// Diagnostics is every problem of a playbook, sorted by position. It is the
// error Load and Parse return when a playbook is invalid.
type Diagnostics []Diagnostic

// Error prints one diagnostic per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// sortDiagnostics orders ds by file, line and column, keeping the order of
// discovery for equal positions, and drops exact duplicates.
func sortDiagnostics(ds Diagnostics) Diagnostics {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	out := ds[:0]
	seen := map[Diagnostic]bool{}
	for _, d := range ds {
		if seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, d)
	}
	return out
}
