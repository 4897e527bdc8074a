package playbook

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTheNameChecksMatchTheirPatterns: each hand-written check accepts
// what its published pattern matches and nothing else, over every string
// of up to four bytes of an alphabet that holds each class's edges, and
// the lengths around the bound of 63.
func TestTheNameChecksMatchTheirPatterns(t *testing.T) {
	alphabet := []byte("az09AZ._/-@é")
	var cases []string
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		cases = append(cases, string(prefix))
		if len(prefix) == 4 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	for n := 60; n <= 66; n++ {
		for _, s := range []string{strings.Repeat("a", n), "a" + strings.Repeat("-", n-2) + "a", "A" + strings.Repeat("b", n-1), "a" + strings.Repeat("/", n-2) + "0"} {
			cases = append(cases, s)
		}
	}
	for _, c := range []struct {
		pattern string
		check   func(string) bool
	}{{namePattern, validName}, {labelKeyPattern, labelKey}, {labelValuePattern, labelValue}} {
		re := regexp.MustCompile(c.pattern)
		for _, s := range cases {
			assert.Equal(t, re.MatchString(s), c.check(s), "%s against %q", c.pattern, s)
		}
	}
	assert.Greater(t, len(cases), 20000)
}
