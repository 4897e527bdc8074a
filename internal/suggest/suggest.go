// Package suggest finds the name a user probably meant: the "did you mean"
// of every unknown-key, unknown-step, unknown-parameter and unknown-command
// message. One policy for the whole program, so the loader, the expression
// checker, the params decoder and the CLI agree on what is a likely typo.
package suggest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxLen bounds the names compared (longer ones are never suggested).
const maxLen = 64

// Closest returns the candidate nearest to s by edit distance (ignoring
// case) when it is near enough to be a typo, else "". An edit is an
// insertion, deletion, substitution or swap of two neighbours. The
// allowance grows with the length of the longer name: 1 edit up to 4
// characters, 2 up to 8, 3 beyond; a candidate must also keep at least one character of its
// own. Ties go to the candidate that sorts first.
func Closest(s string, candidates []string) string {
	n := utf8.RuneCountInString(s)
	if n > maxLen {
		return ""
	}
	ls := strings.ToLower(s)
	best, bestD := "", maxLen
	for _, c := range candidates {
		if c == s {
			continue
		}
		cn := utf8.RuneCountInString(c)
		limit := allowance(max(n, cn))
		if cn > maxLen || abs(cn-n) > limit {
			continue
		}
		d := distance(ls, strings.ToLower(c))
		if d > limit || d >= cn {
			continue
		}
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// allowance is the number of edits tolerated between names whose longer
// one has n characters.
func allowance(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// Hint returns `; did you mean "x"?` for the closest candidate, or "".
func Hint(s string, candidates []string) string {
	if c := Closest(s, candidates); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

// distance is the optimal-string-alignment distance of a and b in runes:
// Levenshtein plus the swap of two adjacent characters as one edit.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	rows := [3][]int{make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)}
	for j := range rows[1] {
		rows[1][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		pp, prev, cur := rows[0], rows[1], rows[2]
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		rows[0], rows[1], rows[2] = prev, cur, pp
	}
	return rows[1][len(rb)]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
