package logncrash_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/logncrash"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	simlnc "github.com/runbook/runbook/internal/sim/logncrash"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/logncrash"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func desc(t *testing.T) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup("logncrash.send")
	require.True(t, ok)
	return d
}

// TestSendIsNotMutatingAndSaysADuplicateIsAcceptable checks that
// logncrash.send has an example, is not marked mutating, and says in its
// summary why: a duplicate log line is acceptable. (The contract suite runs
// over every registered type in internal/steps/all.)
func TestSendIsNotMutatingAndSaysADuplicateIsAcceptable(t *testing.T) {
	require.NotNil(t, desc(t).Example, "logncrash.send has an example")
	assert.False(t, desc(t).Mutating)
	assert.Contains(t, desc(t).Summary, "duplicate log line is acceptable")
}

func TestLoadTimeChecks(t *testing.T) {
	cases := []struct {
		name string
		with map[string]any
		want string
	}{
		{"a missing message", map[string]any{}, "message"},
		{"an unknown level", map[string]any{"message": "m", "level": "TRACE"}, "level"},
		{"a reserved field name", map[string]any{"message": "m", "fields": map[string]any{"body": "x"}}, `fields.body: field name "body" is reserved`},
		{"a field name with a dot", map[string]any{"message": "m", "fields": map[string]any{"a.b": 1}}, "letters, digits and _"},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			ps := desc(t).CheckLiteral(c.with)
			require.NotEmpty(t, ps)
			assert.Contains(t, fmt.Sprint(ps), c.want)
		})
	}
}

// TestMoreFieldsThanTheCollectorTakesAreRefused: the limit is in the
// schema an editor reads as well as in the load-time check.
func TestMoreFieldsThanTheCollectorTakesAreRefused(t *testing.T) {
	fields := map[string]any{}
	for i := range logncrash.MaxFields + 1 {
		fields[fmt.Sprintf("f%d", i)] = i
	}
	with := map[string]any{"message": "m", "fields": fields}
	ps := desc(t).CheckLiteral(with)
	require.Len(t, ps, 1)
	assert.Equal(t, fmt.Sprintf("fields: must have at most %d entries (got %d)", logncrash.MaxFields, logncrash.MaxFields+1), ps[0].Error())
	b, err := json.Marshal(with)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Error(t, stepstest.CompileSchema(t, desc(t).ParamsSchema()).Validate(doc))
	delete(fields, "f0")
	assert.Empty(t, desc(t).CheckLiteral(with), "exactly %d fields are accepted", logncrash.MaxFields)
}

func TestSendRecordsTheLogInTheSimulator(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"logncrash"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	svc := srv.Service("logncrash").(*simlnc.Service)

	d := desc(t)
	with := map[string]any{"message": "deployed", "fields": map[string]any{"endpoint": "ep-1", "replicas": int64(2)}}
	require.Empty(t, d.CheckLiteral(with))
	c := stepstest.NewCall(t, d, with)
	stepstest.HostOf(c).Connections["logncrash"] = srv.Connections()["logncrash"]
	out, err := d.Run(context.Background(), c)
	require.NoError(t, err)
	assert.Equal(t, steps.Outputs{"sent": true}, out)

	logs := svc.Logs()
	require.Len(t, logs, 1)
	l := logs[0].Log
	assert.Equal(t, "deployed", l["body"])
	assert.Equal(t, "INFO", l["logLevel"])
	assert.Equal(t, "1.0.0", l["projectVersion"])
	assert.Equal(t, "ep-1", l["endpoint"])
	assert.Equal(t, json.Number("2"), l["replicas"])

	t.Run("cancelling while the collector is slow returns promptly", func(t *testing.T) {
		srv.Faults.Add(sim.Fault{Service: "logncrash", Latency: 10 * time.Second})
		t.Cleanup(srv.Faults.Clear)
		c := stepstest.NewCall(t, d, with)
		stepstest.HostOf(c).Connections["logncrash"] = srv.Connections()["logncrash"]
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(200 * time.Millisecond); cancel() }()
		start := time.Now()
		_, err := d.Run(ctx, c)
		assert.Less(t, time.Since(start), stepstest.Prompt)
		assert.Equal(t, fault.Cancelled, fault.CodeOf(err), "%v", err)
	})
}
