package expr

import (
	"fmt"
	"strconv"
	"strings"
)

// This file matches ranges itself rather than with
// github.com/Masterminds/semver/v3 (checked at v3.5.0), which disagrees
// with the documented behaviour of semverSatisfies on 7.0.0:
//
//   - "^x", "^x.x" and "<=x" are false there; npm reads ^* and <=* as *, so
//     they are true here.
//   - ">x" and "!=x" are true there; npm's >* matches nothing, and so do
//     >x and !=x here.
//   - "==1.2.3" is an "improper constraint" there; == is = here.
//   - "x-rc" matches there; here it is refused as an invalid version.
//   - Its version parsers either refuse the "v" of Kubernetes versions
//     (StrictNewVersion: "invalid characters in version") or accept
//     partial ones (NewVersion: "1.2" is 1.2.0), where semverCompare
//     wants v1.29.3 accepted and 1.2 refused.
//   - Its errors ("improper constraint: \">=\"") do not say what is wrong;
//     here they name the empty constraint, the missing number or the
//     extra part.
//
// Working around all of these would keep this parser and tokenizer and
// leave the library only the comparisons below.

// semver is a parsed semantic version (semver.org 2.0.0, leading "v"
// allowed). parts counts the numbers given ("1.2" has 2), for ranges.
type semver struct {
	nums  [3]uint64
	parts int
	pre   []string
}

func parseSemver(s string, partial bool) (semver, error) {
	var v semver
	in := s
	s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "v"), "V")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '-'); i >= 0 {
		pre := s[i+1:]
		s = s[:i]
		if pre == "" {
			return v, fmt.Errorf("invalid version %q: empty prerelease", shorten(in, 40))
		}
		v.pre = strings.Split(pre, ".")
		for _, id := range v.pre {
			if id == "" {
				return v, fmt.Errorf("invalid version %q: empty prerelease identifier", shorten(in, 40))
			}
		}
	}
	fields := strings.Split(s, ".")
	if len(fields) > 3 || (!partial && len(fields) != 3) {
		return v, fmt.Errorf("invalid version %q: want MAJOR.MINOR.PATCH", shorten(in, 40))
	}
	for i, f := range fields {
		if f == "x" || f == "X" || f == "*" {
			if !partial {
				return v, fmt.Errorf("invalid version %q", shorten(in, 40))
			}
			break
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil || f == "" || f[0] == '+' {
			return v, fmt.Errorf("invalid version %q: %q is not a number", shorten(in, 40), shorten(f, 20))
		}
		v.nums[i] = n
		v.parts = i + 1
	}
	if v.parts == 0 && len(v.pre) > 0 {
		return v, fmt.Errorf("invalid version %q", shorten(in, 40))
	}
	return v, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compare orders versions per semver.org: numbers, then a version with a
// prerelease before the one without, then prerelease identifiers.
func (a semver) compare(b semver) int {
	for i := 0; i < 3; i++ {
		if c := cmpUint(a.nums[i], b.nums[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, y := a.pre[i], b.pre[i]
		xn, xerr := strconv.ParseUint(x, 10, 64)
		yn, yerr := strconv.ParseUint(y, 10, 64)
		switch {
		case xerr == nil && yerr == nil:
			if c := cmpUint(xn, yn); c != 0 {
				return c
			}
		case xerr == nil:
			return -1
		case yerr == nil:
			return 1
		default:
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
		}
	}
	return cmpUint(uint64(len(a.pre)), uint64(len(b.pre)))
}

// bump returns the smallest version above every version matching the
// first n numbers of v (1.2 -> 1.3.0).
func (v semver) bump(n int) semver {
	var out semver
	if n == 0 {
		out.nums[0] = ^uint64(0)
		return out
	}
	copy(out.nums[:], v.nums[:n])
	out.nums[n-1]++
	out.parts = 3
	out.pre = []string{"0"}
	return out
}

func fnSemverCompare(_ *evalState, args []any) (any, error) {
	as, err := argString("version", args[0])
	if err != nil {
		return nil, err
	}
	bs, err := argString("version", args[1])
	if err != nil {
		return nil, err
	}
	a, err := parseSemver(as, false)
	if err != nil {
		return nil, err
	}
	b, err := parseSemver(bs, false)
	if err != nil {
		return nil, err
	}
	return a.compare(b), nil
}

// fnSemverSatisfies checks a version against a constraint: comparators
// (>=1.2.3, >1, <2, <=1.4, =1.2.3, !=1.2.3), tilde (~1.2: >=1.2.0 <1.3.0),
// caret (^1.2.3: >=1.2.3 <2.0.0; ^0.2.3: <0.3.0), bare or x versions
// (1.2 or 1.2.x: >=1.2.0 <1.3.0). Comparators separated by commas or
// spaces must all hold; "||" separates alternatives.
func fnSemverSatisfies(_ *evalState, args []any) (any, error) {
	vs, err := argString("version", args[0])
	if err != nil {
		return nil, err
	}
	cs, err := argString("constraint", args[1])
	if err != nil {
		return nil, err
	}
	v, err := parseSemver(vs, false)
	if err != nil {
		return nil, err
	}
	if len(cs) > 1024 {
		return nil, fmt.Errorf("constraint longer than 1024 bytes")
	}
	any := false
	for _, alt := range strings.Split(cs, "||") {
		ok, err := satisfiesAll(v, alt)
		if err != nil {
			return nil, err
		}
		any = any || ok
	}
	return any, nil
}

func satisfiesAll(v semver, cs string) (bool, error) {
	toks := strings.FieldsFunc(cs, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(toks) == 0 {
		return false, fmt.Errorf("empty constraint")
	}
	ok := true
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if strings.Trim(t, "<>=!~^") == "" && i+1 < len(toks) {
			t += toks[i+1]
			i++
		}
		m, err := satisfies(v, t)
		if err != nil {
			return false, err
		}
		ok = ok && m
	}
	return ok, nil
}

func satisfies(v semver, c string) (bool, error) {
	op := ""
	for _, p := range []string{">=", "<=", "!=", "==", ">", "<", "=", "~", "^"} {
		if strings.HasPrefix(c, p) {
			op, c = p, c[len(p):]
			break
		}
	}
	if c == "*" || c == "x" || c == "X" {
		// any version, as in npm: only > and < (and !=) exclude them all
		return op != ">" && op != "<" && op != "!=", nil
	}
	w, err := parseSemver(c, true)
	if err != nil {
		return false, err
	}
	cmp := v.compare(w)
	switch op {
	case ">=":
		return cmp >= 0, nil
	case ">":
		if w.parts < 3 {
			return v.compare(w.bump(w.parts)) >= 0, nil
		}
		return cmp > 0, nil
	case "<":
		return cmp < 0, nil
	case "<=":
		if w.parts < 3 {
			return v.compare(w.bump(w.parts)) < 0, nil
		}
		return cmp <= 0, nil
	case "!=":
		return cmp != 0, nil
	case "~":
		n := w.parts
		if n > 2 {
			n = 2
		}
		return cmp >= 0 && v.compare(w.bump(n)) < 0, nil
	case "^":
		n := 1
		for n < w.parts && n < 3 && w.nums[n-1] == 0 {
			n++
		}
		if w.parts == 0 {
			n = 0
		}
		return cmp >= 0 && v.compare(w.bump(n)) < 0, nil
	default: // "", "=", "=="
		if w.parts < 3 {
			return cmp >= 0 && v.compare(w.bump(w.parts)) < 0, nil
		}
		return cmp == 0, nil
	}
}
