package expr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSemver(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"build metadata is ignored", `semverCompare("1.2.3+build.5", "1.2.3")`, 0},
		{"numeric prereleases compare as numbers", `semverCompare("1.0.0-2", "1.0.0-10")`, -1},
		{"a longer prerelease with the same start is later", `semverCompare("1.0.0-alpha.1", "1.0.0-alpha")`, 1},
		{"a release is later than its prerelease", `semverCompare("1.0.0", "1.0.0-rc.1")`, 1},
		{"a numeric identifier is before an alphanumeric one", `semverCompare("1.0.0-alpha", "1.0.0-1")`, 1},
		{">= holds for the version itself", `semverSatisfies("1.2.3", ">=1.2.3")`, true},
		{"> a partial version is above its whole range", `[semverSatisfies("1.2.9", ">1.2"), semverSatisfies("1.3.0", ">1.2")]`, []any{false, true}},
		{"a prerelease of the next minor is above a partial version", `semverSatisfies("1.3.0-0", ">1.2")`, true},
		{"a release is above its prerelease", `semverSatisfies("1.2.3", ">1.2.3-rc")`, true},
		{"<= a partial version takes its whole range", `[semverSatisfies("1.2.9", "<=1.2"), semverSatisfies("1.3.0", "<=1.2")]`, []any{true, false}},
		{"<= a whole version takes it", `[semverSatisfies("1.2.3", "<=1.2.3"), semverSatisfies("1.2.4", "<=1.2.3")]`, []any{true, false}},
		{"<= a partial version excludes the prereleases of the next one", `semverSatisfies("1.3.0-0", "<=1.2")`, false},
		{"<= a prerelease excludes its release", `semverSatisfies("1.2.3", "<=1.2.3-rc")`, false},
		{"!= excludes one version", `[semverSatisfies("1.2.3", "!=1.2.3"), semverSatisfies("1.2.4", "!=1.2.3")]`, []any{false, true}},
		{"== is =", `[semverSatisfies("1.2.3", "==1.2.3"), semverSatisfies("1.2.4", "=1.2.3")]`, []any{true, false}},
		{"an operator may stand apart from its version", `semverSatisfies("1.5.0", ">= 1.2.3, < 2")`, true},
		{"x matches any version", `[semverSatisfies("1.2.3", "x"), semverSatisfies("1.2.3", "*"), semverSatisfies("1.2.3", ">=X"), semverSatisfies("1.2.3", "<x")]`, []any{true, true, true, false}},
		{"x.x matches any version", `semverSatisfies("1.2.3", "x.x")`, true},
		{"a partial version without operator is its whole range", `[semverSatisfies("1.2.0", "1.2"), semverSatisfies("1.2.99", "1.2"), semverSatisfies("1.3.0-0", "1.2"), semverSatisfies("1.2.0-rc", "1.2")]`, []any{true, true, false, false}},
		{"1.2.x is 1.2", `[semverSatisfies("1.2.9", "1.2.x"), semverSatisfies("1.3.0", "1.2.x")]`, []any{true, false}},
		{"a prerelease without operator is only that prerelease", `[semverSatisfies("1.2.3", "1.2.3-rc"), semverSatisfies("1.2.3-rc", "=1.2.3-rc")]`, []any{false, true}},
		{"a whole version without operator is equality", `[semverSatisfies("1.2.3", "1.2.3"), semverSatisfies("1.2.4", "1.2.3")]`, []any{true, false}},
		{"tilde takes the version itself", `semverSatisfies("1.2.0", "~1.2")`, true},
		{"tilde excludes a prerelease of the next minor", `semverSatisfies("1.3.0-0", "~1.2")`, false},
		{"tilde of a whole version allows later patches", `[semverSatisfies("1.2.9", "~1.2.3"), semverSatisfies("1.2.2", "~1.2.3"), semverSatisfies("1.3.0", "~1.2.3")]`, []any{true, false, false}},
		{"tilde of a major allows its minors", `[semverSatisfies("1.9.0", "~1"), semverSatisfies("2.0.0", "~1")]`, []any{true, false}},
		{"caret excludes the prereleases of the next major", `[semverSatisfies("2.0.0-0", "^1.2.3"), semverSatisfies("1.2.3", "^1.2.3")]`, []any{false, true}},
		{"caret of 0.0 allows patches below 0.1.0", `[semverSatisfies("0.0.5", "^0.0"), semverSatisfies("0.1.0", "^0.0")]`, []any{true, false}},
		{"caret of 0.0.3 allows only 0.0.3", `[semverSatisfies("0.0.3", "^0.0.3"), semverSatisfies("0.0.4", "^0.0.3")]`, []any{true, false}},
		{"tilde, caret, <= and == of x allow any version, as in npm", `[semverSatisfies("7.0.0", "^x"), semverSatisfies("7.0.0", "~*"), semverSatisfies("7.0.0", "<=x"), semverSatisfies("7.0.0", "==x")]`, []any{true, true, true, true}},
		{"> and != of x allow no version", `[semverSatisfies("7.0.0", ">x"), semverSatisfies("7.0.0", "!=x")]`, []any{false, false}},
		{"tilde and caret of x.x allow any version", `[semverSatisfies("7.0.0", "~x.x"), semverSatisfies("7.0.0", "^x.x")]`, []any{true, true}},
		{"a constraint of 1024 bytes is accepted", `semverSatisfies("1.2.3", ">=1.0.0" + repeat(" ", 1017))`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalExpr(t, tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSemverErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"a constraint over 1024 bytes is refused", `semverSatisfies("1.2.3", ">=1.0.0" + repeat(" ", 1018))`, "semverSatisfies: constraint longer than 1024 bytes"},
		{"an operator without a version is refused", `semverSatisfies("1.2.3", ">=")`, `semverSatisfies: invalid version "": "" is not a number`},
		{"an empty constraint is refused", `semverSatisfies("1.2.3", "1.x || ")`, "semverSatisfies: empty constraint"},
		{"an empty prerelease is refused", `semverCompare("1.2.3-", "1.2.3")`, `semverCompare: invalid version "1.2.3-": empty prerelease`},
		{"an empty prerelease identifier is refused", `semverCompare("1.2.3-a..b", "1.2.3")`, `semverCompare: invalid version "1.2.3-a..b": empty prerelease identifier`},
		{"x is not a version to compare", `semverCompare("1.x.0", "1.2.3")`, `semverCompare: invalid version "1.x.0"`},
		{"a letter is not a version number", `semverCompare("1.a.3", "1.2.3")`, `semverCompare: invalid version "1.a.3": "a" is not a number`},
		{"a prerelease of x is refused", `semverSatisfies("1.2.3", "x-rc")`, `semverSatisfies: invalid version "x-rc"`},
		{"four numbers are refused", `semverSatisfies("1.2.3", "1.2.3.4")`, `semverSatisfies: invalid version "1.2.3.4": want MAJOR.MINOR.PATCH`},
		{"a version must be a string", `semverCompare(1, "1.2.3")`, "semverCompare: version must be a string, got integer"},
		{"a constraint must be a string", `semverSatisfies("1.2.3", 1)`, "semverSatisfies: constraint must be a string, got integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evalExpr(t, tt.src)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	assert.Len(t, ">=1.0.0"+strings.Repeat(" ", 1017), 1024, "the accepted constraint is 1024 bytes")
}
