package expr

import (
	"testing"
	"time"
)

var fuzzSeeds = []string{
	"plain",
	"${{ inputs.n }}",
	"a ${{ inputs.cluster }} b ${{ steps.supports.outputs.latest }}",
	`${{ "a}}b" }}`,
	`${{ {"a": {"b": 1}} }}`,
	"$${{ x }}",
	"${{ 1",
	"${{ }}",
	`${{ reduce(1..64, #acc + #acc, "x") }}`,
	`${{ map(steps.nodes.outputs.items, .name) }}`,
	`${{ inputs.version ?? steps.supports.outputs.latest }}`,
	`${{ semverSatisfies("1.2.3", "^1.2 || >=3") }}`,
	`${{ cidrHost("fd00::/8", -5) }}`,
	`${{ format("%5.2f %q", 1.5, "x") }}`,
	`${{ toJSON(fromJSON("[1,{\"a\":null}]")) }}`,
	`${{ let x = 1..10; filter(x, # % 2 == 0) }}`,
	`${{ success() && !cancelled() }}`,
	`${{ steps["probe"].error.code }}`,
	"${{ `raw}}` }}",
	`${{ 'single}}' }}`,
	`${{ 9223372036854775807 + 1 }}`,
	`${{ -9223372036854775807..9223372036854775807 }}`,
	`${{ 1 / 0 }} ${{ 0.0 / 0.0 }}`,
}

func fuzzEnv() *TypeEnv {
	te := testEnv()
	te.Item, te.Result, te.Error = true, true, true
	return te
}

func fuzzScope() *Scope {
	s := testScope()
	s.Item, s.Index, s.HasItem = map[string]any{"name": "x"}, 1, true
	s.Result = map[string]any{"id": 1}
	s.Error = &ErrorInfo{Code: "c"}
	return s
}

func FuzzTemplate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		for _, te := range []*TypeEnv{fuzzEnv(), nil} {
			v, err := CompileTemplate(src, te)
			if err != nil {
				errs := []error{err}
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					errs = j.Unwrap() // several parts, each with its error
				}
				for _, err := range errs {
					ce, ok := err.(*CompileError)
					if !ok {
						t.Fatalf("not a CompileError: %T %v", err, err)
					}
					if ce.Offset < 0 || ce.Offset > len(src) {
						t.Fatalf("offset %d outside source of %d bytes", ce.Offset, len(src))
					}
				}
				continue
			}
			start := time.Now()
			_, _ = v.Eval(fuzzScope())
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("eval took %v", d)
			}
			_ = v.Refs()
		}
	})
}

func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Add(`steps.supports.status == "succeeded" && inputs.n > 3`)
	f.Add(`all(steps.nodes.outputs.items, .name != "")`)
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Compile(src, fuzzEnv())
		if err != nil {
			if ce, ok := err.(*CompileError); !ok || ce.Offset < 0 || ce.Offset > len(src) {
				t.Fatalf("bad compile error %T %v", err, err)
			}
			return
		}
		start := time.Now()
		_, _ = p.EvalBool(fuzzScope())
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("eval took %v", d)
		}
		_ = p.UsesStatusFunc()
	})
}
