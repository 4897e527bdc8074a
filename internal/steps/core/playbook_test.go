package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestPlaybook(t *testing.T) {
	d := desc(t, "playbook")
	t.Run("the child's outputs become the step's outputs", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"path": "sub/child.yaml", "inputs": map[string]any{"n": 2}})
		var gotPath string
		var gotInputs map[string]any
		stepstest.HostOf(c).RunPlaybookFunc = func(_ context.Context, path string, inputs map[string]any) (steps.Outputs, error) {
			gotPath, gotInputs = path, inputs
			return steps.Outputs{"answer": 42}, nil
		}
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.Equal(t, steps.Outputs{"answer": 42}, out)
		assert.Equal(t, "sub/child.yaml", gotPath)
		assert.Equal(t, map[string]any{"n": 2}, gotInputs)
		assert.True(t, d.OpenOutputs)
	})
	t.Run("a suspended child suspends the step", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"path": "child.yaml"})
		stepstest.HostOf(c).RunPlaybookFunc = func(context.Context, string, map[string]any) (steps.Outputs, error) {
			return nil, fault.ErrSuspended
		}
		_, err := d.Run(context.Background(), c)
		assert.ErrorIs(t, err, fault.ErrSuspended)
	})
	t.Run("the path is required", func(t *testing.T) {
		assert.Equal(t, "path: is required", d.CheckLiteral(map[string]any{})[0].Error())
	})
}
