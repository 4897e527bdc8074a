package steps

// Per-value checks: each applies the parsed rules of one field to one
// decoded value and words the problem the way every diagnostic reads,
// "must be between 1 and 10 (got 12)".

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runbook/runbook/internal/jsonvalue"
)

func (dc *decoder) checkString(path, s string, r *rules) bool {
	if r == nil {
		return true
	}
	ok := true
	if r.minLen >= 0 || r.maxLen >= 0 {
		n := utf8.RuneCountInString(s)
		if msg := lengthMessage(n, r.minLen, r.maxLen, "characters"); msg != "" {
			dc.add(path, "%s", msg)
			ok = false
		}
	}
	if len(r.enum) > 0 && !contains(r.enum, s) {
		msg := fmt.Sprintf("must be one of %s (got %s)", strings.Join(r.enum, ", "), quote(s))
		for _, e := range r.enum {
			if strings.EqualFold(e, s) {
				msg += fmt.Sprintf("; did you mean %q?", e)
				break
			}
		}
		dc.add(path, "%s", msg)
		return false
	}
	if r.pattern != nil && !r.pattern.MatchString(s) {
		if r.like != "" {
			dc.add(path, "must be of the form %s (got %s)", r.like, quote(s))
		} else {
			dc.add(path, "must match %s (got %s)", r.pattern, quote(s))
		}
		ok = false
	}
	if r.format != "" {
		if msg := checkFormat(r.format, s); msg != "" {
			dc.add(path, "%s (got %s)", msg, quote(s))
			ok = false
		}
	}
	return ok
}

// checkFormat returns what is wrong with s for format, or "".
func checkFormat(format, s string) string {
	switch format {
	case "duration":
		if _, err := time.ParseDuration(s); err != nil {
			return "must be a duration like 30s or 5m"
		}
	case "cidr":
		if _, err := netip.ParsePrefix(s); err != nil {
			return "must be a CIDR like 10.0.0.0/16"
		}
	case "ip":
		if _, err := netip.ParseAddr(s); err != nil {
			return "must be an IP address like 10.0.0.1"
		}
	case "uri":
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || (u.Host == "" && u.Opaque == "" && u.Path == "") {
			return "must be an absolute URI like https://example.com/path"
		}
	case "semver":
		if !semverRe().MatchString(s) {
			return "must be a semantic version like v1.2.3"
		}
	}
	return ""
}

func (dc *decoder) checkNumber(path string, f float64, text string, r *rules) bool {
	if r == nil {
		return true
	}
	if msg := rangeMessage(f, r.min, r.max, formatNumber); msg != "" {
		dc.add(path, "%s (got %s)", msg, text)
		return false
	}
	if len(r.enum) > 0 && !contains(r.enum, text) {
		dc.add(path, "must be one of %s (got %s)", strings.Join(r.enum, ", "), text)
		return false
	}
	return true
}

func (dc *decoder) checkDuration(path string, d Duration, r *rules) bool {
	if r == nil {
		return true
	}
	f := func(x float64) string { return Duration(x).String() }
	if msg := rangeMessage(float64(d), r.min, r.max, f); msg != "" {
		dc.add(path, "%s (got %s)", msg, d)
		return false
	}
	return true
}

func (dc *decoder) checkCount(path string, n int, unit string, r *rules) {
	if r == nil {
		return
	}
	if msg := lengthMessage(n, r.minLen, r.maxLen, unit); msg != "" {
		msg = strings.Replace(msg, "must be", "must have", 1)
		dc.add(path, "%s", msg)
	}
}

func rangeMessage(f float64, lo, hi *float64, format func(float64) string) string {
	switch {
	case lo != nil && hi != nil && (f < *lo || f > *hi):
		return fmt.Sprintf("must be between %s and %s", format(*lo), format(*hi))
	case lo != nil && f < *lo:
		return fmt.Sprintf("must be at least %s", format(*lo))
	case hi != nil && f > *hi:
		return fmt.Sprintf("must be at most %s", format(*hi))
	}
	return ""
}

func lengthMessage(n, lo, hi int, unit string) string {
	switch {
	case lo >= 0 && hi >= 0 && (n < lo || n > hi):
		if lo == hi {
			return fmt.Sprintf("must be exactly %d %s (got %d)", lo, unit, n)
		}
		return fmt.Sprintf("must be between %d and %d %s (got %d)", lo, hi, unit, n)
	case lo >= 0 && n < lo:
		return fmt.Sprintf("must be at least %d %s (got %d)", lo, unit, n)
	case hi >= 0 && n > hi:
		return fmt.Sprintf("must be at most %d %s (got %d)", hi, unit, n)
	}
	return ""
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// quote quotes s for a message, shortening long values.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 60 {
		r := []rune(s)
		return strconv.Quote(string(r[:57])) + "..."
	}
	return strconv.Quote(s)
}

// describe names the kind (jsonvalue.Kind) and the value of v for "got
// ..." messages: string "x", integer 3, boolean true, null, a list.
func describe(v any) string {
	switch x := v.(type) {
	case Dynamic:
		return "an expression"
	case string:
		return "string " + quote(x)
	case float64:
		return "number " + formatNumber(x)
	case float32:
		return "number " + formatNumber(float64(x))
	}
	switch kind := jsonvalue.Kind(v); kind {
	case "list", "map":
		return "a " + kind
	case "boolean", "integer", "number":
		return kind + " " + fmt.Sprint(v)
	default:
		return kind
	}
}

func typeWord(s *shape) string {
	switch unptr(s).kind {
	case kString:
		return "a string"
	case kBool:
		return "a boolean"
	case kInt:
		return "an integer"
	case kFloat:
		return "a number"
	case kDuration:
		return "a duration like 30s or 5m"
	case kSlice:
		return "a list"
	case kMap, kStruct:
		return "a map"
	}
	return "a value"
}
