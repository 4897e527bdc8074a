package expr

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The compile-time estimate of closure iterations is what a playbook
// author sees when nested closures over literal collections are refused:
// the message gives the estimate, the offset points at the closure that
// first goes over the limit.
func TestClosureEstimate(t *testing.T) {
	refused := []struct {
		name   string
		src    string
		offset int
		msg    string
	}{
		{"an estimate under a billion is spelled out", `reduce(1..1000, reduce(1..1001, 1, 0), 0)`, 0, "expression too expensive: about 1002000 closure iterations (limit 1000000)"},
		{"an estimate of a billion is written as a power of ten", `reduce(1..1000, reduce(1..999999, 1, 0), 0)`, 0, "expression too expensive: about 1e+09 closure iterations (limit 1000000)"},
		{"a one-element range runs its body once", `map(1..1, reduce(1..1000000, #acc, 0))`, 0, "about 1000001 closure iterations"},
		{"a range from a negative number counts every element", `map(-1..1, reduce(1..500000, #acc, 0))`, 0, "about 1500003 closure iterations"},
		{"a range from a negative to a negative number counts every element", `map(-3..-2, reduce(1..500000, #acc, 0))`, 0, "about 1000002 closure iterations"},
		{"an array literal runs its body once per element", `map([1, 2], reduce(1..500000, #acc, 0))`, 0, "about 1000002 closure iterations"},
		{"the initial value of reduce counts once", `reduce(1..10, #acc, reduce(1..1000000, #acc, 0))`, 0, "about 1000010 closure iterations"},
		{"a closure over the result of a closure counts both", `filter(map(1..1000000, #), true)`, 0, "about 1000001 closure iterations"},
		{"the closure that goes over the limit is pointed at", `map(1..2, map(1..1000001, #))`, 10, "about 2000004 closure iterations"},
		{"a closure at the limit is not pointed at when the outer one goes over", `map(1..2, map(1..1000000, #))`, 0, "about 2000002 closure iterations"},
		{"closures side by side add up, pointed at as a whole", `len(map(1..600000, 1)) + len(map(1..600000, 1))`, 23, "about 1200000 closure iterations"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.src, nil)
			var ce *CompileError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrTooExpensive)
			assert.Contains(t, ce.Msg, tt.msg)
			assert.Equal(t, tt.offset, ce.Offset, "offset")
		})
	}
	accepted := []struct {
		name string
		src  string
	}{
		{"closures up to the limit compile", `map(1..2, map(1..499999, #))`},
		{"a descending range runs no iterations", `map(2..1, reduce(1..1000000, #acc, 0))`},
		{"a closure over a computed list counts it as one element until run time", `map(inputs.tags, reduce(1..999999, #acc, 0))`},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.src, nil)
			assert.NoError(t, err)
		})
	}
	t.Run("a descending range yields an empty list", func(t *testing.T) {
		got, err := evalExpr(t, `map(2..1, reduce(1..1000000, #acc, 0))`)
		require.NoError(t, err)
		assert.Equal(t, []any{}, got)
	})
}

func TestRewrittenNames(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"a missing secret is nil without a type environment", `secrets.nope ?? "d"`, "d"},
		{"a missing env variable is nil without a type environment", `env.NOPE == nil`, true},
		{"env reads a variable", `env.HOME`, "/root"},
		{"env reads a variable by index", `env["HOME"]`, "/root"},
		{"a dynamic env index of a missing name is nil", `env[inputs.cluster]`, nil},
		{"a missing key all along a chain is nil", `inputs.x.y.z`, nil},
		{"a chain reads through lists", `steps.supports.outputs.versions[1]`, "v1.30.2"},
		{"a computed property is evaluated", `{"a": {"b": 2}}["a"][string("b")]`, 2},
		{"integer addition stays integer", `1 + 2`, 3},
		{"mixed addition is a float", `inputs.n + 1.5`, 6.5},
		{"strings concatenate", `"a" + "b"`, "ab"},
		{"a constant pattern matches", `"abc" matches "^a"`, true},
		{"a dynamic pattern matches", `"abc" matches ("^" + "a")`, true},
		{"a nil pattern matches nothing", `"abc" matches inputs.version`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalExpr(t, tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("a type error of integer arithmetic is found at compile time", func(t *testing.T) {
		_, err := Compile(`(1 + 2) > "a"`, nil)
		var ce *CompileError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, `invalid operation: > (mismatched types int and string)`, ce.Msg)
	})
	t.Run("a dynamic pattern that is not a string is an error", func(t *testing.T) {
		_, err := evalExpr(t, `1 matches inputs.cluster`)
		assert.ErrorContains(t, err, "matches wants strings, got integer and string")
	})
	t.Run("a bad dynamic pattern is an error", func(t *testing.T) {
		_, err := evalExpr(t, `"a" matches ("(" + "")`)
		assert.ErrorContains(t, err, "error parsing regexp: missing closing )")
	})
}
