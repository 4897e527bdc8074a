package playbook

import (
	"fmt"
	"sort"
	"strconv"
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

// suggest returns the candidate closest to s when it is near enough to be
// a likely typo, else "".
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	limit := 2
	if len(s) <= 2 {
		limit = 1
	}
	for _, c := range candidates {
		d := editDistance(s, c)
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if bestD > limit || best == s {
		return ""
	}
	return best
}

// didYouMean formats the hint suffix of an unknown-name message.
func didYouMean(s string, candidates []string) string {
	if c := suggest(s, candidates); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b (in bytes; names are
// ASCII). Strings far apart in length are not compared in full.
func editDistance(a, b string) int {
	if d := len(a) - len(b); d > 3 || d < -3 {
		return 4
	}
	if len(a) > 64 || len(b) > 64 {
		return 4
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// joinPath appends a field name to a diagnostic path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// keyPath appends a map key, quoting it when it is not a plain name.
func keyPath(path, key string) string {
	if plainName(key) {
		return joinPath(path, key)
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// indexPath appends a list index.
func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// plainName reports whether key needs no quoting in a path (the same rule
// as the steps package uses for Problem paths).
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
