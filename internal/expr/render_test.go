package expr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"a float below a millionth is in exponent form", `string(0.0000001)`, "1e-07"},
		{"a millionth is in decimal form", `string(0.000001)`, "0.000001"},
		{"a float of 1e21 is in exponent form", `string(1e21)`, "1e+21"},
		{"a float in exponent form keeps every digit", `string(0.000000125) + " " + string(1.25e21)`, "1.25e-07 1.25e+21"},
		{"a float below 1e21 is in decimal form", `string(1e20)`, "100000000000000000000"},
		{"zero is 0", `string(0.0)`, "0"},
		{"a negative float keeps its sign", `string(-2.5)`, "-2.5"},
		{"infinity renders as text", `string(1.0 / 0.0)`, "+Inf"},
		{"JSON escapes quotes, backslashes and control characters", `toJSON("a\"b\\c\nd\te\r" + fromJSON("\"\\u0001\\u007f\""))`, `"a\"b\\c\nd\te\r\u0001\u007f"`},
		{"JSON keeps non-ASCII text and escapes line separators", `toJSON("é" + fromJSON("\"\\u2028\""))`, `"é\u2028"`},
		{"JSON replaces invalid UTF-8", `toJSON(base64Decode("gA=="))`, `"\ufffd"`},
		{"JSON of a list nested 100 levels", `len(toJSON(reduce(1..99, [#acc], [1])))`, 201},
		{"JSON of a map nested 100 levels", `len(toJSON(reduce(1..99, ({"a": #acc}), {"a": 1})))`, 601},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalExpr(t, tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	errs := []struct {
		name string
		src  string
		want string
	}{
		{"NaN inside a list is an error", `string([0.0 / 0.0])`, "string: cannot render NaN as JSON"},
		{"JSON of a map nested 101 levels is refused", `toJSON(reduce(1..100, ({"a": #acc}), {"a": 1}))`, "toJSON: value nested deeper than 100 levels"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evalExpr(t, tt.src)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestReturnedValues(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // "" when the value is returned
	}{
		{"a list nested 100 levels is returned", `${{ reduce(1..99, [#acc], [1]) }}`, ""},
		{"a list nested 101 levels is refused", `${{ reduce(1..100, [#acc], [1]) }}`, "value nested deeper than 100 levels"},
		{"a map nested 100 levels is returned", `${{ reduce(1..99, ({"a": #acc}), {"a": 1}) }}`, ""},
		{"a map nested 101 levels is refused", `${{ reduce(1..100, ({"a": #acc}), {"a": 1}) }}`, "value nested deeper than 100 levels"},
		{"a list of strings at level 100 is returned", `${{ reduce(1..98, [#acc], [split("a", ",")]) }}`, ""},
		{"a list of strings at level 101 is refused", `${{ reduce(1..99, [#acc], [split("a", ",")]) }}`, "value nested deeper than 100 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := CompileTemplate(tt.src, nil)
			require.NoError(t, err)
			_, err = v.Eval(testScope())
			if tt.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.want)
			}
		})
	}
}

// The byte budget of one evaluation (MaxOutputBytes) holds exactly: what
// fits is returned, one byte more is refused.
func TestBudgetEdges(t *testing.T) {
	scope := func(n int) *Scope {
		s := testScope()
		s.Inputs["s"] = strings.Repeat("x", n)
		s.Inputs["mib"] = strings.Repeat("x", 1<<20)
		s.Inputs["mib2"] = strings.Repeat("x", 2<<20)
		return s
	}
	tests := []struct {
		name string
		src  string
		size int
		want int // length of the string or list returned; 0 when refused
	}{
		{"string of a value of the whole budget", `${{ len(string(inputs.s)) }}`, MaxOutputBytes, MaxOutputBytes},
		{"a list of one string of the whole budget", `${{ [inputs.s] }}`, MaxOutputBytes - 8, 1},
		{"a list of one string one byte over the budget", `${{ [inputs.s] }}`, MaxOutputBytes - 7, 0},
		{"a list of a string and nil of the whole budget", `${{ [inputs.s, nil] }}`, MaxOutputBytes - 12, 2},
		{"a list of a string and nil one byte over the budget", `${{ [inputs.s, nil] }}`, MaxOutputBytes - 11, 0},
		{"a part after a long part has the rest of the budget", `${{ inputs.mib2 }}${{ inputs.mib }}`, 0, 3 << 20},
		{"a list after a long part has the rest of the budget", `${{ inputs.mib2 }}${{ [inputs.mib] }}`, 0, 3<<20 + 4},
		{"two parts may fill the budget exactly", `${{ inputs.mib2 }}${{ inputs.mib2 }}`, 0, 4 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := CompileTemplate(tt.src, nil)
			require.NoError(t, err)
			got, err := v.Eval(scope(tt.size))
			if tt.want == 0 {
				assert.ErrorContains(t, err, "expression too expensive: value is larger than 4194304 bytes")
				assert.ErrorIs(t, err, ErrTooExpensive)
				return
			}
			require.NoError(t, err)
			switch x := got.(type) {
			case string:
				assert.Len(t, x, tt.want)
			case []any:
				assert.Len(t, x, tt.want)
			case int:
				assert.Equal(t, tt.want, x)
			default:
				t.Fatalf("unexpected %T", got)
			}
		})
	}
}

func TestGoArrays(t *testing.T) {
	s := testScope()
	s.Steps["probe"].Outputs = map[string]any{"ports": [2]int{80, 443}}
	assert.Equal(t, []any{80, 443}, eval(t, "${{ steps.probe.outputs.ports }}", nil, s), "a Go array in an output is returned as a list")
	assert.Equal(t, "ports: [80,443]", eval(t, "ports: ${{ steps.probe.outputs.ports }}", nil, s), "a Go array in an output interpolates as JSON")
}

func TestTemplateBudget(t *testing.T) {
	s := testScope()
	s.Inputs["mib2"] = strings.Repeat("x", 2<<20)
	v, err := CompileTemplate(`${{ inputs.mib2 }}${{ [inputs.mib2] }}`, nil)
	require.NoError(t, err)
	_, err = v.Eval(s)
	assert.ErrorContains(t, err, `evaluate "[inputs.mib2]": expression too expensive: value renders to more than 4194304 bytes`, "the error names the part that goes over")
	assert.ErrorIs(t, err, ErrTooExpensive)
}
