package expr

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var clock = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func testEnv() *TypeEnv {
	return &TypeEnv{
		Inputs: map[string]string{"cluster": "string", "version": "string", "n": "integer", "tags": "list"},
		Steps: map[string]StepType{
			"supports": {Outputs: map[string]bool{"latest": true, "versions": true}},
			"probe":    {Open: true},
			"nodes":    {ForEach: true, Outputs: map[string]bool{"name": true}},
			"silent":   {},
		},
		AllSteps: map[string]bool{"supports": true, "probe": true, "nodes": true, "silent": true, "upgrade": true, "report": true},
	}
}

func testScope() *Scope {
	return &Scope{
		Inputs: map[string]any{"cluster": "prod", "n": 5, "tags": []any{"a", "b"}},
		Steps: map[string]*StepState{
			"supports": {Status: "succeeded", Outputs: map[string]any{"latest": "v1.30.2", "versions": []any{"v1.29.0", "v1.30.2"}}},
			"probe":    {Status: "failed", Error: &ErrorInfo{Code: "throttled", Message: "slow down", Attempt: 2}},
			"nodes":    {Status: "succeeded", Outputs: map[string]any{"count": 2, "items": []any{map[string]any{"name": "n1"}, map[string]any{"name": "n2"}}}},
		},
		Env:     map[string]string{"HOME": "/root"},
		Secrets: map[string]string{"token": "s3cret"},
		Trigger: map[string]any{"ref": "main"},
		Run:     RunInfo{ID: "r-1", Playbook: "upgrade", StartedAt: clock, Status: "running"},
		Now:     func() time.Time { return clock },
	}
}

func eval(t *testing.T, src string, te *TypeEnv, s *Scope) any {
	t.Helper()
	v, err := CompileTemplate(src, te)
	require.NoError(t, err)
	out, err := v.Eval(s)
	require.NoError(t, err)
	return out
}

func TestTemplateEval(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"a string without ${{ is a literal", "plain text", "plain text"},
		{"a whole template keeps an integer", "${{ inputs.n }}", 5},
		{"a whole template keeps a list", "${{ inputs.tags }}", []any{"a", "b"}},
		{"a whole template keeps a map", `${{ {"a": 1} }}`, map[string]any{"a": 1}},
		{"a whole template keeps a boolean", "${{ inputs.n > 3 }}", true},
		{"a whole template of a missing input is nil", "${{ inputs.version }}", nil},
		{"whitespace inside the braces still makes a whole template", "${{inputs.n}}", 5},
		{"text around a part makes a string", "n=${{ inputs.n }}", "n=5"},
		{"nil interpolates as empty", "[${{ inputs.version }}]", "[]"},
		{"a float interpolates without trailing zeros", "${{ 1.5 * 2 }} ${{ 0.1 + 0.2 > 0 }}", "3 true"},
		{"a list interpolates as compact JSON", "tags: ${{ inputs.tags }}", `tags: ["a","b"]`},
		{"a map interpolates as JSON with sorted keys", `m: ${{ {"b": 1, "a": [true, nil]} }}`, `m: {"a":[true,null],"b":1}`},
		{"several parts interpolate in order", "${{ inputs.cluster }}/${{ inputs.n }}/${{ run.id }}", "prod/5/r-1"},
		{"}} inside a string literal does not end the part", `${{ "a}}b" }}`, "a}}b"},
		{"a nested map literal does not end the part", `x${{ {"a": {"b": 1}}.a.b }}`, "x1"},
		{"}} inside a backtick string does not end the part", "${{ `a}}b` }}", "a}}b"},
		{"an empty backtick string is a string", "x${{ `` }}", "x"},
		{"}} inside a single-quoted string does not end the part", `${{ 'a\'}}' }}`, "a'}}"},
		{"an escaped double quote does not end the string", `${{ "a\"}}" }}`, `a"}}`},
		{"an empty map literal is a whole value", "${{ {} }}", map[string]any{}},
		{"a closing brace of a map is not the end of the part", `${{ {"a": 1}["a"] }}-`, "1-"},
		{"a third brace after the part is text", "${{ 1 }}}", "1}"},
		{"}} before a part is text", "}}${{ 1 }}", "}}1"},
		{"adjacent parts interpolate", "${{ 1 }}${{ 2 }}", "12"},
		{"a lone $${{ is a literal ${{", "a $${{", "a ${{"},
		{"$${{ escapes a literal ${{", "$${{ not an expression }}", "${{ not an expression }}"},
		{"an escape and a part mix", "$${{ x }} ${{ inputs.n }}", "${{ x }} 5"},
		{"?? falls back to a step output", "${{ inputs.version ?? steps.supports.outputs.latest }}", "v1.30.2"},
		{"index syntax reads steps and outputs", `${{ steps["supports"].outputs["latest"] }}`, "v1.30.2"},
		{"a missing output key is nil", `${{ steps.probe.outputs.anything }}`, nil},
		{"a nil step error reads as nil all along the chain", `${{ steps.supports.error.code }}`, nil},
		{"a step error has its fields", `${{ steps.probe.error.code }}/${{ steps.probe.error.attempt }}`, "throttled/2"},
		{"a step error as a whole value is a map", `${{ steps.probe.error }}`, map[string]any{"code": "throttled", "message": "slow down", "data": nil, "attempt": 2}},
		{"for_each outputs have items and count", `${{ steps.nodes.outputs.count }} ${{ steps.nodes.outputs.items[1].name }}`, "2 n2"},
		{"a missing env variable is nil", `${{ env.NOPE ?? "none" }} ${{ env.HOME }}`, "none /root"},
		{"secrets read like env", `${{ secrets.token }}`, "s3cret"},
		{"trigger reads the payload", `${{ trigger.ref }}`, "main"},
		{"run has started_at and status", `${{ run.started_at }} ${{ run.status }}`, "2026-03-14T15:09:26Z running"},
		{"a ternary works", `${{ inputs.n > 3 ? "big" : "small" }}`, "big"},
		{"in works on lists", `${{ "a" in inputs.tags }}`, true},
		{"startsWith is an operator", `${{ inputs.cluster startsWith "pr" }}`, true},
		{"a closure over a list works", `${{ map(steps.nodes.outputs.items, .name) }}`, []any{"n1", "n2"}},
		{"let binds names", `${{ let x = inputs.n; x * 2 }}`, 10},
		{"times interpolate as RFC 3339", `${{ now() }}`, clock},
		{"string + number concatenation is an error free string", `${{ "n" + string(inputs.n) }}`, "n5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, eval(t, tt.src, testEnv(), testScope()))
		})
	}
}

func TestStatusFunctions(t *testing.T) {
	tests := []struct {
		name              string
		failed, cancelled bool
		src               string
		want              bool
	}{
		{"success() is true when nothing failed", false, false, "success()", true},
		{"success() is false once a step failed", true, false, "success()", false},
		{"failure() is true once a step failed", true, false, "failure()", true},
		{"always() is true after a cancel", false, true, "always()", true},
		{"cancelled() is true after a cancel", false, true, "cancelled()", true},
		{"success() is false after a cancel", false, true, "${{ success() }}", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.src, testEnv())
			require.NoError(t, err)
			assert.True(t, p.UsesStatusFunc())
			got, err := p.EvalBool(&Scope{Failed: tt.failed, Cancelled: tt.cancelled})
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	p, err := Compile("inputs.n > 1", testEnv())
	require.NoError(t, err)
	assert.False(t, p.UsesStatusFunc(), "a condition without status function reports none")
}

func TestContextNames(t *testing.T) {
	t.Run("item and index are defined inside for_each", func(t *testing.T) {
		te := testEnv()
		te.Item = true
		s := testScope()
		s.Item, s.Index, s.HasItem = map[string]any{"name": "pool-a"}, 3, true
		assert.Equal(t, "pool-a#3", eval(t, "${{ item.name }}#${{ index }}", te, s))
	})
	t.Run("result is defined in outputs", func(t *testing.T) {
		te := testEnv()
		te.Result = true
		s := testScope()
		s.Result = map[string]any{"id": "c-1"}
		assert.Equal(t, "c-1", eval(t, "${{ result.id }}", te, s))
	})
	t.Run("error is defined in retry.if", func(t *testing.T) {
		te := testEnv()
		te.Error = true
		s := testScope()
		s.Error = &ErrorInfo{Code: "throttled", Attempt: 1}
		assert.Equal(t, true, eval(t, `${{ error.code == "throttled" && error.attempt < 3 }}`, te, s))
	})
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		offset int
		msg    string
	}{
		{"an unknown step suggests the closest id", "${{ steps.suports.outputs.latest }}", 10, `unknown step "suports"; did you mean "supports"?`},
		{"a later step must be in needs", "${{ steps.upgrade.status }}", 10, `step "upgrade" does not run before this step; add it to needs`},
		{"an unknown output lists the outputs", "v=${{ steps.supports.outputs.lates }}", 29, `step "supports" has no output "lates" (outputs: latest, versions); did you mean "latest"?`},
		{"an unknown output of a step without outputs says so", "${{ steps.silent.outputs.x }}", 25, `step "silent" has no output "x" (it has no outputs)`},
		{"a for_each step has items and count", "${{ steps.nodes.outputs.name }}", 24, `step "nodes" has no output "name" (outputs: count, items)`},
		{"an unknown step field is refused", "${{ steps.supports.output.latest }}", 19, `step "supports" has no field "output" (fields: outputs, status, error); did you mean "outputs"?`},
		{"index syntax is checked too", `${{ steps["supports"].outputs["nope"] }}`, 30, `step "supports" has no output "nope" (outputs: latest, versions)`},
		{"an unknown input is refused", "a ${{ inputs.clustr }}", 13, `unknown input "clustr"; did you mean "cluster"?`},
		{"an unknown root name is refused", "${{ input.cluster }}", 4, `unknown name "input"; did you mean "inputs"?`},
		{"an unknown function is refused", "${{ uper(inputs.cluster) }}", 4, `unknown function "uper"; did you mean "upper"?`},
		{"item outside for_each is refused", "${{ item.name }}", 4, "item is only defined inside for_each"},
		{"result outside outputs is refused", "${{ result }}", 4, "result is only defined in a step's outputs"},
		{"error outside retry.if is refused", "${{ error.code }}", 4, "error is only defined in retry.if"},
		{"an unterminated part is refused at its start", "abc ${{ inputs.n", 4, "unterminated ${{ (no matching }})"},
		{"an unterminated backtick string leaves the part unterminated", "x ${{ `a }}", 2, "unterminated ${{ (no matching }})"},
		{"an unterminated string leaves the part unterminated", `x ${{ "a }}`, 2, "unterminated ${{ (no matching }})"},
		{"a string ending in a backslash leaves the part unterminated", `x ${{ "a\`, 2, "unterminated ${{ (no matching }})"},
		{"a single closing brace does not end the part", "x ${{ 1 }", 2, "unterminated ${{ (no matching }})"},
		{"a stray closing brace is a syntax error, not the end of the part", "${{ 1 } }}", 6, `unexpected token Bracket("}")`},
		{"a syntax error points into the part", "ab ${{ 1 + }}", 10, "unexpected token EOF"},
		{"an offset counts bytes before a multibyte rune", "é ${{ inputs.nope }}", 14, `unknown input "nope"`},
		{"an empty part is refused", "x ${{ }}", 5, "empty expression"},
		{"a status function takes no arguments", "${{ success(1) }}", 4, "success() takes no arguments"},
		{"a function is checked for arity", `${{ replace("a") }}`, 4, "replace: not enough arguments (want 3, got 1)"},
		{"run fields are checked", "${{ run.name }}", 8, `run has no field "name" (fields: id, playbook, started_at, status)`},
		{"hidden names are not reachable", "${{ __rt }}", 4, `unknown name "__rt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileTemplate(tt.src, testEnv())
			var ce *CompileError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.offset, ce.Offset, "offset")
			assert.True(t, strings.HasPrefix(ce.Msg, tt.msg), "message %q does not start with %q", ce.Msg, tt.msg)
		})
	}
}

func TestCompile(t *testing.T) {
	t.Run("a bare expression compiles", func(t *testing.T) {
		p, err := Compile(`inputs.n > 3`, testEnv())
		require.NoError(t, err)
		ok, err := p.EvalBool(testScope())
		require.NoError(t, err)
		assert.True(t, ok)
	})
	t.Run("one whole ${{ }} compiles", func(t *testing.T) {
		p, err := Compile(` ${{ inputs.n }} `, testEnv())
		require.NoError(t, err)
		v, err := p.Eval(testScope())
		require.NoError(t, err)
		assert.Equal(t, 5, v)
	})
	t.Run("an error offset inside ${{ }} counts from the source start", func(t *testing.T) {
		_, err := Compile(`${{ inputs.nope }}`, testEnv())
		var ce *CompileError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 11, ce.Offset)
	})
	t.Run("text around ${{ }} is refused", func(t *testing.T) {
		_, err := Compile(`${{ inputs.n }} > 3`, testEnv())
		require.Error(t, err)
	})
	t.Run("EvalBool refuses a non-boolean", func(t *testing.T) {
		p, err := Compile(`inputs.n`, testEnv())
		require.NoError(t, err)
		_, err = p.EvalBool(testScope())
		assert.ErrorContains(t, err, "expected a boolean, got integer")
	})
	t.Run("a nil TypeEnv accepts any reference", func(t *testing.T) {
		p, err := Compile(`steps.whatever.outputs.x ?? item`, nil)
		require.NoError(t, err)
		v, err := p.Eval(&Scope{})
		require.NoError(t, err)
		assert.Nil(t, v)
	})
	t.Run("a run-time error names the expression", func(t *testing.T) {
		p, err := Compile(`inputs.tags[5]`, nil)
		require.NoError(t, err)
		_, err = p.Eval(testScope())
		assert.ErrorContains(t, err, `evaluate "inputs.tags[5]": index out of range`)
	})
}

func TestRefs(t *testing.T) {
	te := testEnv()
	te.Item = true
	v, err := CompileTemplate(`${{ inputs.cluster }} ${{ steps.supports.outputs.latest }} ${{ steps.probe.status }} ${{ secrets.token }} ${{ env.HOME }} ${{ trigger.ref }} ${{ item }} ${{ inputs.cluster }}`, te)
	require.NoError(t, err)
	assert.Equal(t, []Ref{
		{Kind: "input", Name: "cluster"},
		{Kind: "step", Name: "supports", Output: "latest"},
		{Kind: "step", Name: "probe"},
		{Kind: "secret", Name: "token"},
		{Kind: "env", Name: "HOME"},
		{Kind: "trigger", Name: "ref"},
		{Kind: "item"},
	}, v.Refs())
	t.Run("a dynamic index refers to the whole namespace", func(t *testing.T) {
		p, err := Compile(`secrets[inputs.cluster]`, te)
		require.NoError(t, err)
		assert.Contains(t, p.Refs(), Ref{Kind: "secret"})
	})
	t.Run("let names are not references", func(t *testing.T) {
		_, err := Compile(`let cluster = 1; cluster + 1`, te)
		require.NoError(t, err)
	})
}

func TestComposite(t *testing.T) {
	tmpl, err := CompileTemplate("${{ inputs.n }}", testEnv())
	require.NoError(t, err)
	m := Map([]string{"n", "list", "lit"}, []Value{tmpl, List([]Value{Literal("a"), tmpl}), Literal(true)})
	assert.False(t, m.Literal(), "a map with a template is not literal")
	assert.True(t, Map([]string{"a"}, []Value{List([]Value{Literal(1)})}).Literal(), "a map of literals is literal")
	got, err := m.Eval(testScope())
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"n": 5, "list": []any{"a", 5}, "lit": true}, got)
	assert.Equal(t, []Ref{{Kind: "input", Name: "n"}}, m.Refs())
}

func TestEvalErrorsWrap(t *testing.T) {
	p, err := Compile(`let r = 1..1000; reduce(r, reduce(r, #acc + 1, 0), 0)`, nil)
	require.NoError(t, err)
	_, err = p.Eval(&Scope{})
	assert.True(t, errors.Is(err, ErrTooExpensive), "got %v", err)
}

func TestConcurrentEval(t *testing.T) {
	p, err := Compile(`steps.supports.status == "succeeded" && inputs.n > 3 && len(map(inputs.tags, upper(#))) == 2`, testEnv())
	require.NoError(t, err)
	tmpl, err := CompileTemplate(`${{ inputs.cluster }}-${{ index }}`, nil)
	require.NoError(t, err)
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				s := testScope()
				s.Index, s.HasItem = i, true
				ok, err := p.EvalBool(s)
				if err != nil || !ok {
					done <- fmt.Errorf("condition: %v %v", ok, err)
					return
				}
				v, err := tmpl.Eval(s)
				if err != nil || v != fmt.Sprintf("prod-%d", i) {
					done <- fmt.Errorf("template: %v %v", v, err)
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		require.NoError(t, <-done)
	}
}

func TestCompileBareWithTemplateText(t *testing.T) {
	t.Run("a bare expression may compare with a literal ${{", func(t *testing.T) {
		p, err := Compile(`inputs.cluster != "${{"`, testEnv())
		require.NoError(t, err)
		ok, err := p.EvalBool(testScope())
		require.NoError(t, err)
		assert.True(t, ok)
	})
	t.Run("text before ${{ is refused with a clear message", func(t *testing.T) {
		_, err := Compile(`inputs.n > ${{ 3 }}`, testEnv())
		var ce *CompileError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 11, ce.Offset)
		assert.Contains(t, ce.Msg, "bare or a single ${{ }}")
	})
}
