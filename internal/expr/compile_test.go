package expr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompileOffsets(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		offset int
		msg    string
	}{
		{"text after a whole part points after its }}", "  ${{ 1 }}  x", 10, "an expression must be bare or a single ${{ }}, not text after }}"},
		{"a part right where the syntax error is points at the part", "1 ${{ 2 }}", 2, "an expression must be bare or a single ${{ }}, not text around ${{ }}"},
		{"a part after a ${{ in a string is found", `1 + "${{" + ${{ 2 }}`, 12, "an expression must be bare or a single ${{ }}, not text around ${{ }}"},
		{"a syntax error after a ${{ in a string is reported as it is", `"${{" + x y`, 10, `unexpected token Identifier("y")`},
		{"an unterminated whole part points at its start", "  ${{ 1 ", 2, "unterminated ${{ (no matching }})"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.src, nil)
			var ce *CompileError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.msg, ce.Msg)
			assert.Equal(t, tt.offset, ce.Offset, "offset")
		})
	}
	t.Run("an estimate error inside a template counts from the template start", func(t *testing.T) {
		_, err := CompileTemplate("x ${{ map(1..2, map(1..1000001, #)) }}", nil)
		var ce *CompileError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 16, ce.Offset)
	})
	t.Run("an expression of 4096 bytes compiles", func(t *testing.T) {
		p, err := Compile(strings.Repeat(" ", MaxExprLen-1)+"1", nil)
		require.NoError(t, err)
		v, err := p.Eval(nil)
		require.NoError(t, err)
		assert.Equal(t, 1, v)
	})
	t.Run("an expression of 4097 bytes is refused", func(t *testing.T) {
		_, err := Compile(strings.Repeat(" ", MaxExprLen)+"1", nil)
		assert.ErrorContains(t, err, "expression too expensive: expression is 4097 bytes (limit 4096)")
	})
}

func TestErrorTexts(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"a value of 64 bytes is quoted whole", `cidrPrefix(repeat("1", 64))`, `cidrPrefix: invalid CIDR "` + strings.Repeat("1", 64) + `"`},
		{"a value of 65 bytes is cut to 64", `cidrPrefix(repeat("1", 65))`, `cidrPrefix: invalid CIDR "` + strings.Repeat("1", 64) + `…"`},
		{"a value is cut before a multibyte rune", `cidrPrefix(repeat("1", 63) + "é")`, `cidrPrefix: invalid CIDR "` + strings.Repeat("1", 63) + `…"`},
		{"a value of stray continuation bytes is cut to nothing", `cidrPrefix(repeat(base64Decode("gA=="), 65))`, `cidrPrefix: invalid CIDR "…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evalExpr(t, tt.src)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
