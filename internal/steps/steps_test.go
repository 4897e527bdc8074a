package steps

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestATypeNameIsDottedLowerCaseWords: typeName accepts what the pattern
// of a type's name, ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$, matches, and
// nothing else.
func TestATypeNameIsDottedLowerCaseWords(t *testing.T) {
	re := regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
	cases := []string{"", "log", "nks.cluster_create", "a.b.c", "a1_.b2", "A", "1a", "_a", "a.", ".a", "a..b", "a.B", "a-b", "a b", "é", "a.1", "nks.cluster.", "z9"}
	alphabet := []byte("az09_.A-")
	for i := range 20000 { // every string of up to 5 bytes over alphabet, and more
		var b []byte
		for n := i; n > 0; n /= len(alphabet) + 1 {
			if d := n % (len(alphabet) + 1); d > 0 {
				b = append(b, alphabet[d-1])
			}
		}
		cases = append(cases, string(b))
	}
	for _, c := range cases {
		assert.Equal(t, re.MatchString(c), typeName(c), "%q", c)
	}
}
