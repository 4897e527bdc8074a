package expr

import "testing"

func benchScope() *Scope {
	return &Scope{
		Inputs: map[string]any{"n": 5, "cluster": "prod-1"},
		Steps: map[string]*StepState{
			"a": {Status: "succeeded", Outputs: map[string]any{"latest": "v1.30.2"}},
		},
	}
}

func BenchmarkCondition(b *testing.B) {
	p, err := Compile(`steps.a.status == "succeeded" && inputs.n > 3`, nil)
	if err != nil {
		b.Fatal(err)
	}
	s := benchScope()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := p.EvalBool(s)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkTemplate(b *testing.B) {
	v, err := CompileTemplate(`upgrade ${{ inputs.cluster }} to ${{ steps.a.outputs.latest }} (${{ inputs.n }} nodes)`, nil)
	if err != nil {
		b.Fatal(err)
	}
	s := benchScope()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Eval(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(`steps.a.status == "succeeded" && inputs.n > 3`, nil); err != nil {
			b.Fatal(err)
		}
	}
}
