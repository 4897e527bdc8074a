package expr_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/expr"
)

func TestEvalDerived(t *testing.T) {
	const tok = "Zq7-secret-Token-4242"
	scope := func() *expr.Scope {
		return &expr.Scope{
			Secrets: map[string]string{"TOKEN": tok},
			Inputs:  map[string]any{"cluster": "c1", "pass": "input-pass-99"},
			Env:     map[string]string{"HOME": "/root", "DERIVED": "x" + tok},
			Steps: map[string]*expr.StepState{
				"a": {Status: "succeeded", Outputs: map[string]any{"name": "plain", "masked": "***"}},
				"b": {Status: "succeeded", Outputs: map[string]any{"token": "x" + tok, "plain": "b-plain"}},
				"c": nil,
			},
			Error:  &expr.ErrorInfo{Code: "unauthorized", Message: "refused " + tok},
			Secret: func(s string) bool { return strings.Contains(s, tok) || strings.Contains(s, "input-pass-99") },
		}
	}
	cases := []struct {
		name, tmpl string
		want       []string // derived strings; nil: none
	}{
		{"upper() of a secret derives", "${{ upper(secrets.TOKEN) }}", []string{strings.ToUpper(tok)}},
		{"lower() of a secret derives", "${{ lower(secrets.TOKEN) }}", []string{strings.ToLower(tok)}},
		{"sha256() of a secret derives", "${{ sha256(secrets.TOKEN) }}", nil},
		{"a slice of a secret derives", "${{ secrets.TOKEN[0:12] }}", []string{tok[:12]}},
		{"truncate() derives", "${{ truncate(secrets.TOKEN, 12) }}", []string{tok[:12]}},
		{"replace() derives", `${{ replace(secrets.TOKEN, "-", "_") }}`, []string{strings.ReplaceAll(tok, "-", "_")}},
		{"one character at a time derives whole", `${{ join(split(secrets.TOKEN, ""), " ") }}`, []string{strings.Join(strings.Split(tok, ""), " ")}},
		{"a list built from a secret derives per element", `${{ [secrets.TOKEN[0:4], "lit"] }}`, []string{tok[:4]}},
		{"a map built from a secret derives keys and values", `${{ {"k": secrets.TOKEN[1:9]} }}`, []string{tok[1:9]}},
		{"an interpolated part derives, not the text around it", "Bearer ${{ upper(secrets.TOKEN) }} now", []string{strings.ToUpper(tok)}},
		{"literals of the expression are not derived", `${{ secrets.TOKEN != "" ? "enabled" : "disabled" }}`, nil},
		{"a secret input read through Secret derives", "${{ upper(inputs.pass) }}", []string{"INPUT-PASS-99"}},
		{"an env value holding a secret derives", "${{ lower(env.DERIVED) }}", []string{strings.ToLower("x" + tok)}},
		{"a dynamic secrets index derives", `${{ secrets["TO" + "KEN"][2:10] }}`, []string{tok[2:10]}},
		{"plain inputs do not derive", "${{ upper(inputs.cluster) }}", nil},
		{"masked step outputs do not derive", "${{ steps.a.outputs.masked + steps.a.outputs.name }}", nil},
		{"a step output holding a secret derives", "${{ lower(steps.b.outputs.token) }}", []string{strings.ToLower("x" + tok)}},
		{"a plain output of a step with a secret one does not derive", "${{ upper(steps.b.outputs.plain) }}", nil},
		{"a step's status does not derive from another step's secret", "${{ upper(steps.a.status) }}", nil},
		{"a step chosen at run time derives from any step's secret", `${{ upper(steps[lower("B")].outputs.token) }}`, []string{strings.ToUpper("x" + tok)}},
		{"a dynamic env index holding a secret derives", `${{ lower(env["DERI" + "VED"]) }}`, []string{strings.ToLower("x" + tok)}},
		{"an error message holding a secret derives", "${{ upper(error.message) }}", []string{strings.ToUpper("refused " + tok)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := expr.CompileTemplate(tc.tmpl, nil)
			require.NoError(t, err)
			val, derived, err := expr.EvalDerived(v, scope())
			require.NoError(t, err)
			plain, err := v.Eval(scope())
			require.NoError(t, err)
			assert.Equal(t, plain, val, "EvalDerived returns what Eval does")
			if tc.name == "sha256() of a secret derives" {
				require.Len(t, derived, 1)
				assert.Len(t, derived[0], 64)
				return
			}
			slices.Sort(derived)
			slices.Sort(tc.want)
			assert.Equal(t, tc.want, derived)
		})
	}
	t.Run("map and list values derive element by element", func(t *testing.T) {
		a, _ := expr.CompileTemplate("${{ upper(secrets.TOKEN) }}", nil)
		b, _ := expr.CompileTemplate("${{ upper(inputs.cluster) }}", nil)
		v := expr.Map([]string{"a", "b"}, []expr.Value{a, expr.List([]expr.Value{b, a})})
		_, derived, err := expr.EvalDerived(v, scope())
		require.NoError(t, err)
		assert.Equal(t, []string{strings.ToUpper(tok), strings.ToUpper(tok)}, derived)
	})
	t.Run("a program's EvalDerived derives too", func(t *testing.T) {
		p, err := expr.Compile("secrets.TOKEN[3:11]", nil)
		require.NoError(t, err)
		_, derived, err := p.EvalDerived(scope())
		require.NoError(t, err)
		assert.Equal(t, []string{tok[3:11]}, derived)
	})
	t.Run("result read inside outputs derives when it holds a secret", func(t *testing.T) {
		p, err := expr.Compile("upper(result.body)", nil)
		require.NoError(t, err)
		s := scope()
		s.Result = map[string]any{"body": "got " + tok}
		_, derived, err := p.EvalDerived(s)
		require.NoError(t, err)
		assert.Equal(t, []string{strings.ToUpper("got " + tok)}, derived)
	})
}
