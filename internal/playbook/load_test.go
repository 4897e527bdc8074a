package playbook

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/expr"
)

func TestLoadFillsTheModel(t *testing.T) {
	pb, err := Load("testdata/good/full.yaml", LoadOptions{})
	require.NoError(t, err)

	assert.Equal(t, "nks-maintenance-upgrade", pb.Name)
	assert.Equal(t, map[string]string{"team": "platform", "tier": "prod"}, pb.Labels)
	assert.Equal(t, "testdata/good/full.yaml", pb.Path)
	abs, _ := filepath.Abs("testdata/good")
	assert.Equal(t, abs, pb.Dir)
	sum := sha256.Sum256(pb.Source)
	assert.Equal(t, hex.EncodeToString(sum[:]), pb.Hash)
	assert.Equal(t, 36*time.Hour, pb.Timeout)
	assert.Equal(t, 4, pb.MaxParallel)
	assert.Equal(t, []string{"nks_token"}, pb.Secrets)

	require.Len(t, pb.Inputs, 9)
	assert.Equal(t, "cluster", pb.Inputs[0].Name, "inputs keep the written order")
	assert.True(t, pb.Inputs[0].Required)
	assert.Equal(t, 3, pb.Inputs[2].Default)
	assert.Equal(t, []any{"default-worker", "gpu"}, pb.Inputs[5].Default)
	assert.True(t, pb.Inputs[8].Secret)
	assert.Equal(t, Pos{File: "testdata/good/full.yaml", Line: 6, Col: 3}, pb.Inputs[0].Pos)

	require.Len(t, pb.Triggers, 3)
	s := pb.Triggers[0].Schedule
	assert.Equal(t, "Asia/Seoul", s.Location.String())
	assert.Equal(t, "latest", s.Catchup)
	assert.Equal(t, 48*time.Hour, s.CatchupWindow)
	assert.Equal(t, "skip", pb.Triggers[1].Schedule.Overlap, "overlap defaults to skip")
	assert.Equal(t, "none", pb.Triggers[1].Schedule.Catchup, "catchup defaults to none")
	w := pb.Triggers[2].Webhook
	assert.Equal(t, []string{"notice.created", "notice.updated"}, w.Events)
	assert.Equal(t, "hook", w.Each)
	require.NotNil(t, w.If)
	ok, err := w.If.EvalBool(&expr.Scope{Trigger: map[string]any{"body": map[string]any{"kind": "maintenance"}}})
	require.NoError(t, err)
	assert.True(t, ok)
	v, err := pb.Triggers[0].Inputs["cluster"].Eval(&expr.Scope{})
	require.NoError(t, err)
	assert.Equal(t, "prod", v)

	assert.Equal(t, "queue", pb.Concurrency.OnBusy)
	key, err := pb.Concurrency.Key.Eval(&expr.Scope{Inputs: map[string]any{"cluster": "c1"}})
	require.NoError(t, err)
	assert.Equal(t, "nks/c1", key)

	byID := map[string]*Step{}
	for _, st := range append(append(append([]*Step{}, pb.Steps...), pb.OnFailure...), pb.Finally...) {
		byID[st.ID] = st
	}
	assert.Nil(t, byID["start"].Needs, "no needs: nil")
	assert.Equal(t, []string{}, byID["literal_loop"].Needs, "needs: [] is kept as an empty list")
	assert.Empty(t, byID["literal_loop"].DependsOn)
	assert.Equal(t, []string{"start", "facts", "probe", "per_group", "literal_loop"}, byID["script"].DependsOn)
	assert.Equal(t, []string{"probe", "facts"}, byID["per_group"].DependsOn)
	assert.Equal(t, []string{"cleanup"}, byID["bye"].DependsOn)
	assert.Empty(t, byID["alert"].DependsOn)

	assert.Equal(t, []string{"message", "level", "fields"}, byID["start"].WithKeys)
	assert.Equal(t, "log", byID["start"].Desc.Type)
	assert.Equal(t, "Announce", byID["start"].Name)

	r := byID["probe"].Retry
	require.NotNil(t, r)
	assert.Equal(t, 3, r.Attempts)
	assert.Equal(t, 30*time.Second, r.Delay)
	assert.Equal(t, 2.0, r.Backoff)
	assert.Equal(t, 5*time.Minute, r.MaxDelay)
	assert.True(t, r.Jitter)
	require.NotNil(t, r.If)
	assert.Equal(t, 2*time.Minute, byID["probe"].Timeout)
	require.Contains(t, byID["probe"].Outputs, "found")

	pg := byID["per_group"]
	require.NotNil(t, pg.ForEach)
	items, err := pg.ForEach.Eval(&expr.Scope{Inputs: map[string]any{"groups": []any{"a", "b"}}})
	require.NoError(t, err)
	assert.Equal(t, []any{"a", "b"}, items)
	assert.Equal(t, 2, pg.MaxParallel)
	require.NotNil(t, pg.If)
	assert.False(t, pg.If.UsesStatusFunc())
	assert.True(t, byID["report"].If.UsesStatusFunc())
	assert.True(t, byID["script"].ContinueOnError)

	lit, err := byID["literal_loop"].ForEach.Eval(nil)
	require.NoError(t, err)
	assert.Equal(t, []any{"a", "b", "c"}, lit)

	assert.Equal(t, map[string]any{"region": "kr1", "token": "${{ secrets.nks_token }}"}, pb.Connections["nks"])
	assert.Contains(t, pb.Outputs, "target")
	env, err := pb.Env["RETRIES"].Eval(nil)
	require.NoError(t, err)
	assert.Equal(t, "3", env)
}

func TestRetryDefaults(t *testing.T) {
	pb := mustParse(t, `
version: 1
name: r
steps:
  - {id: a, uses: log, with: {message: x}, retry: {}}
`)
	assert.Equal(t, &Retry{Attempts: 3, Delay: time.Second, Backoff: 1}, pb.Steps[0].Retry)
}

func TestALiteralWithIsDecodedOnceAtLoad(t *testing.T) {
	pb := mustParse(t, `
version: 1
name: r
inputs:
  x: {type: string, default: v}
steps:
  - {id: plain, uses: shell, with: {command: "true", env: {I: "1"}}}
  - {id: none, uses: shell, with: {command: "true", env: {I: "${{ inputs.x }}"}}}
  - {id: outputs, uses: set, with: {a: 1, b: [x]}}
`)
	plain := pb.Steps[0]
	require.NotNil(t, plain.Decoded, "no value of its with holds an expression")
	params, extra, problems := plain.Desc.Decode(map[string]any{"command": "true", "env": map[string]any{"I": "1"}})
	require.Empty(t, problems)
	assert.Equal(t, &DecodedWith{Params: params, Extra: extra}, plain.Decoded, "what the engine would decode at each call")
	assert.Nil(t, pb.Steps[1].Decoded, "an expression is evaluated at each call")
	assert.Equal(t, &DecodedWith{Extra: map[string]any{"a": 1, "b": []any{"x"}}}, pb.Steps[2].Decoded,
		"a step whose outputs are its with gets the map itself")
}

func TestNeedsAcceptsOneString(t *testing.T) {
	pb := mustParse(t, `
version: 1
name: r
steps:
  - {id: a, uses: log, with: {message: x}}
  - {id: b, uses: log, with: {message: x}}
  - {id: c, uses: log, needs: a, with: {message: "${{ steps.a.outputs.message }}"}}
`)
	assert.Equal(t, []string{"a"}, pb.Steps[2].Needs)
	assert.Equal(t, []string{"a"}, pb.Steps[2].DependsOn)
}

func TestTakeOverIsABooleanOffByDefault(t *testing.T) {
	const body = "version: 1\nname: r\n%ssteps:\n  - {id: a, uses: log, with: {message: x}}\n"
	assert.False(t, mustParse(t, fmt.Sprintf(body, "")).TakeOver)
	assert.True(t, mustParse(t, fmt.Sprintf(body, "take_over: true\n")).TakeOver)
	_, err := Parse("p.yaml", []byte(fmt.Sprintf(body, "take_over: yes please\n")), LoadOptions{})
	require.Error(t, err)
	assert.Equal(t, `p.yaml:3:12: take_over: must be a boolean (got string)`, err.Error())
}

// An input default of the wrong kind is named as a run's input of that
// kind is (jsonvalue.Kind): list, map, number, null.
func TestAnInputDefaultOfTheWrongKindIsNamedAsAtRunTime(t *testing.T) {
	_, err := Parse("p.yaml", []byte(`version: 1
name: r
inputs:
  a: {type: string, default: [x]}
  b: {type: list, default: {k: v}}
  c: {type: integer, default: 1.5}
steps:
  - {id: a, uses: log, with: {message: x}}
`), LoadOptions{})
	require.Error(t, err)
	assert.Equal(t, []string{
		`p.yaml:4:30: inputs.a.default: must be a string (got list)`,
		`p.yaml:5:28: inputs.b.default: must be a list (got map)`,
		`p.yaml:6:31: inputs.c.default: must be an integer (got number)`,
	}, strings.Split(err.Error(), "\n"))
}

func TestImplicitOrderMakesACycle(t *testing.T) {
	_, err := Parse("p.yaml", []byte(`
version: 1
name: r
steps:
  - {id: a, uses: log, needs: [b], with: {message: x}}
  - {id: b, uses: log, with: {message: x}}
`), LoadOptions{})
	require.Error(t, err)
	assert.Equal(t, `p.yaml:6:5: steps[1]: cycle in needs: a -> b -> a (b has no needs, so it runs after every step written before it)`, err.Error())
}

func TestHostileInput(t *testing.T) {
	t.Run("a source over the size cap is refused before parsing", func(t *testing.T) {
		src := "version: 1\nname: big\n# " + strings.Repeat("x", 2000) + "\n"
		_, err := Parse("big.yaml", []byte(src), LoadOptions{MaxBytes: 1000})
		require.Error(t, err)
		assert.Equal(t, "big.yaml:1:1: playbook is larger than 1000 bytes", err.Error())
	})
	t.Run("Load reads no more than the cap", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "big.yaml")
		require.NoError(t, writeFile(path, strings.Repeat("#", DefaultMaxBytes+10)))
		_, err := Load(path, LoadOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("playbook is larger than %d bytes", DefaultMaxBytes))
	})
	t.Run("aliases do not multiply compile work", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("version: 1\nname: amp\nx-a: &a [" + strings.Repeat(`"${{ inputs.x ?? 1 }}",`, 250) + "1]\n")
		b.WriteString("inputs: {x: {}}\nsteps:\n  - {id: s, uses: log, with: {message: m, fields: {k: [" + strings.Repeat("*a,", 190) + "1]}}}\n")
		// Measured as the parsing thread's CPU time, as the linear-time
		// case below is: a 1 s bound on the wall time read 1.03 s once in
		// a full pass with both cores busy.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU(t)
		_, err := Parse("amp.yaml", []byte(b.String()), LoadOptions{})
		took := threadCPU(t) - start
		require.NoError(t, err)
		t.Logf("190 aliases of 250 templates parsed in %s of CPU", took)
		assert.Less(t, took, time.Second)
	})
	t.Run("more than 10000 steps", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("version: 1\nname: many\nsteps:\n")
		for i := 0; i <= MaxSteps; i++ {
			fmt.Fprintf(&b, "- {id: s%d, uses: log}\n", i)
		}
		_, err := Parse("many.yaml", []byte(b.String()), LoadOptions{MaxBytes: 1 << 22})
		require.Error(t, err)
		assert.Equal(t, "many.yaml:1:1: playbook has 10001 steps (limit 10000)", err.Error())
	})
	t.Run("10000 sequential steps load in linear time", func(t *testing.T) {
		chain := func(n int) []byte {
			var b strings.Builder
			b.WriteString("version: 1\nname: many\nsteps:\n- {id: s0, uses: log, with: {message: x}}\n")
			for i := 1; i < n; i++ {
				fmt.Fprintf(&b, "- {id: s%d, uses: log, with: {message: \"${{ steps.s%d.outputs.message }} ${{ steps.s0.outputs.message }}\"}}\n", i, i-1)
			}
			return []byte(b.String())
		}
		// The parse's work is measured as the CPU time of the thread it
		// runs on (the test's goroutine is locked to it), which other
		// processes on a busy machine do not stretch as they stretch
		// wall time: a wall-time ratio read 82x once in a full pass with
		// both cores busy and the load average at 20.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		parse := func(src []byte, n int) time.Duration {
			start := threadCPU(t)
			pb, err := Parse("many.yaml", src, LoadOptions{MaxBytes: 1 << 22})
			took := threadCPU(t) - start
			require.NoError(t, err)
			require.Len(t, pb.Steps, n)
			return took
		}
		// Ten times the steps within 60 times the work (quadratic work
		// takes a hundred; 14x measured on a quiet machine). The small
		// parse's is the median of three.
		small, large := chain(MaxSteps/10), chain(MaxSteps)
		times := []time.Duration{parse(small, MaxSteps/10), parse(small, MaxSteps/10), parse(small, MaxSteps/10)}
		slices.Sort(times)
		base := times[1]
		took := parse(large, MaxSteps)
		t.Logf("%d steps in %s of CPU, %d in %s (%.1fx)", MaxSteps/10, base, MaxSteps, took, float64(took)/float64(base))
		assert.Less(t, took, 60*base, "%d steps took %s, %d took %s", MaxSteps/10, base, MaxSteps, took)
	})
	t.Run("10000 broken steps stop at the diagnostics cap", func(t *testing.T) {
		broken := func(n int) []byte {
			var b strings.Builder
			b.WriteString("version: 1\nname: many\nsteps:\n")
			for i := 0; i < n; i++ {
				fmt.Fprintf(&b, "- {id: s%d, uses: log, with: {message: \"${{ steps.nope.outputs.message }}\"}}\n", i)
			}
			return []byte(b.String())
		}
		// parse returns the bytes a parse allocates: its work, measured
		// alike on a quiet or a loaded machine (a bound of 10 s on the
		// wall time saw 24 s at load average 30).
		parse := func(src []byte) (Diagnostics, uint64) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Parse("many.yaml", src, LoadOptions{MaxBytes: 1 << 22})
			runtime.ReadMemStats(&after)
			var ds Diagnostics
			require.True(t, errors.As(err, &ds))
			return ds, after.TotalAlloc - before.TotalAlloc
		}
		_, small := parse(broken(MaxSteps / 10))
		ds, large := parse(broken(MaxSteps))
		assert.Equal(t, MaxDiagnostics+1, len(ds))
		assert.Equal(t, fmt.Sprintf("many.yaml:1:1: too many problems; stopped after %d", MaxDiagnostics), ds[0].String())
		t.Logf("%d broken steps allocate %d KiB, %d allocate %d KiB (%.1fx)", MaxSteps/10, small>>10, MaxSteps, large>>10, float64(large)/float64(small))
		assert.Less(t, large, 30*small, "ten times the broken steps take at most 30 times the work (quadratic work takes a hundred)")
	})
}

func TestDiagnosticsAreSortedAndComplete(t *testing.T) {
	_, err := Parse("p.yaml", []byte(`
version: 1
name: p
steps:
  - {id: b, uses: lgo}
  - {id: a, uses: log, with: {message: x, lvl: 1}, timeout: soon}
inputs:
  n: {type: integer, default: x}
`), LoadOptions{})
	var ds Diagnostics
	require.True(t, errors.As(err, &ds))
	want := []string{
		`p.yaml:5:19: steps[0].uses: unknown step type "lgo"; did you mean "log"?`,
		`p.yaml:6:43: steps[1].with.lvl: unknown parameter "lvl"; did you mean "level"?`,
		`p.yaml:6:61: steps[1].timeout: invalid duration "soon"; use e.g. 30s, 5m, 2h, 1d`,
		`p.yaml:8:31: inputs.n.default: must be an integer (got string)`,
	}
	assert.Equal(t, strings.Join(want, "\n"), err.Error())
	assert.Equal(t, 4, len(ds))
}

func TestExpressionColumns(t *testing.T) {
	for _, c := range []struct {
		name, value, want string
	}{
		// The error points at "nope" (the expr package reports the member).
		{"plain", `message: x ${{ inputs.nope }}`, "p.yaml:7:29"},
		{"double quoted", `message: "x ${{ inputs.nope }}"`, "p.yaml:7:30"},
		{"single quoted", `message: 'x ${{ inputs.nope }}'`, "p.yaml:7:30"},
		{"literal block", "message: |\n        line one\n          x ${{ inputs.nope }}", "p.yaml:9:24"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "version: 1\nname: p\nsteps:\n  - id: a\n    uses: log\n    with:\n      " + c.value + "\n"
			_, err := Parse("p.yaml", []byte(src), LoadOptions{})
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), c.want+": steps[0].with.message: unknown input \"nope\""), err.Error())
		})
	}
}

func mustParse(t *testing.T, src string) *Playbook {
	t.Helper()
	pb, err := Parse("test.yaml", []byte(src), LoadOptions{})
	require.NoError(t, err)
	return pb
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

// threadCPU is the CPU time the calling thread has used (Linux:
// getrusage RUSAGE_THREAD), user and system.
func threadCPU(t *testing.T) time.Duration {
	t.Helper()
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(rusageThread, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
