package stepstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// Prompt is how long a step may take to return once its context ends.
const Prompt = 2 * time.Second

// Contract is the suite every step type passes. validWith must decode
// without problems; for a step that waits or runs something (sleep, shell,
// an HTTP call to a slow server) it should make the step run for longer
// than a second so that cancelling mid-run is exercised.
//
// It checks that the params and outputs schemas compile as JSON Schema
// draft 2020-12, that validWith decodes, passes CheckLiteral and validates
// against the schema, that Run returns a Cancelled error at once for an
// already cancelled context and promptly when cancelled mid-run, and that
// no goroutine outlives the runs.
//
// Contract must not run in parallel with other tests: it counts goroutines.
func Contract(t *testing.T, d *steps.Descriptor, validWith map[string]any) {
	t.Helper()
	ContractWith(t, d, validWith, ContractOptions{})
}

// ContractOptions adapt the contract to steps that call a service.
type ContractOptions struct {
	// Prepare is applied to every call the contract builds, after its
	// params are decoded: it gives a step its connections (a simulator
	// whose answers an injected latency delays, so that the step is
	// cancelled in the middle of a call).
	Prepare func(*steps.Call)
	// Slow says the step still runs 200ms after it starts: cancelling
	// mid-run must then catch it running, and a step that finished
	// earlier fails the contract instead of skipping that check.
	Slow bool
}

// ContractWith is Contract with options; see ContractOptions.
func ContractWith(t *testing.T, d *steps.Descriptor, validWith map[string]any, o ContractOptions) {
	t.Helper()
	baseline := settledGoroutines(0)
	newCall := func(t *testing.T) *steps.Call {
		c := NewCall(t, d, validWith)
		if o.Prepare != nil {
			o.Prepare(c)
		}
		return c
	}

	t.Run("the params schema compiles as JSON Schema", func(t *testing.T) {
		compile(t, d.ParamsSchema())
	})
	t.Run("the outputs schema compiles as JSON Schema", func(t *testing.T) {
		compile(t, d.OutputsSchema())
	})
	t.Run("the valid params decode, pass load checks and match the schema", func(t *testing.T) {
		if !d.OutputsFromWith {
			_, _, problems := d.Decode(validWith)
			assert.Empty(t, problems)
		}
		assert.Empty(t, d.CheckLiteral(validWith))
		sch := compile(t, d.ParamsSchema())
		assert.NoError(t, sch.Validate(jsonValue(t, validWith)))
	})
	t.Run("an already cancelled context stops the step at once", func(t *testing.T) {
		c := newCall(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		_, err := d.Run(ctx, c)
		assert.Less(t, time.Since(start), Prompt)
		require.Error(t, err)
		assert.Equal(t, fault.Cancelled, fault.CodeOf(err), "error: %v", err)
	})
	t.Run("cancelling mid-run returns promptly", func(t *testing.T) {
		c := newCall(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type result struct {
			err error
			at  time.Time
		}
		done := make(chan result, 1)
		go func() {
			_, err := d.Run(ctx, c)
			done <- result{err, time.Now()}
		}()
		timer := time.NewTimer(200 * time.Millisecond)
		defer timer.Stop()
		select {
		case r := <-done:
			if o.Slow {
				t.Fatalf("%s finished within 200ms though it should still run (err=%v)", d.Type, r.err)
			}
			t.Logf("%s finished before it could be cancelled (err=%v)", d.Type, r.err)
			return
		case <-timer.C:
		}
		cancelled := time.Now()
		cancel()
		select {
		case r := <-done:
			assert.Less(t, r.at.Sub(cancelled), Prompt)
			require.Error(t, r.err, "a step cancelled mid-run must not report success")
			assert.True(t, errors.Is(r.err, context.Canceled) || fault.CodeOf(r.err) == fault.Cancelled,
				"error should be a cancellation: %v", r.err)
		case <-time.After(Prompt + time.Second):
			t.Fatalf("%s did not return within %s of cancellation", d.Type, Prompt)
		}
	})
	// Counted here, not in a subtest: a subtest runs on a goroutine of its own.
	if n := settledGoroutines(baseline); n > baseline {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("goroutine leak: %d goroutines before the runs, %d after:\n%s", baseline, n, buf)
	}
}

// settledGoroutines waits up to 3s for the goroutine count to drop to want
// (0: until it stops changing) and returns it.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if (want > 0 && m <= want) || (want == 0 && m == n) {
			return m
		}
		n = m
	}
	return n
}

// CompileSchema compiles s as a JSON Schema draft 2020-12 document.
func CompileSchema(t testing.TB, s map[string]any) *jsonschema.Schema { return compile(t, s) }

func compile(t testing.TB, s map[string]any) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	require.NoError(t, c.AddResource("mem://schema.json", jsonValue(t, s)))
	sch, err := c.Compile("mem://schema.json")
	require.NoError(t, err)
	return sch
}

// jsonValue round-trips v through JSON into the value model the validator
// expects. steps.Dynamic values become expression strings.
func jsonValue(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(replaceDynamic(v))
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}

func replaceDynamic(v any) any {
	switch x := v.(type) {
	case steps.Dynamic:
		return "${{ dynamic }}"
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = replaceDynamic(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = replaceDynamic(e)
		}
		return out
	}
	return v
}
