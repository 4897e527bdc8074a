package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestSet(t *testing.T) {
	d := desc(t, "set")
	t.Run("every key of with becomes an output", func(t *testing.T) {
		with := map[string]any{"a": 1, "list": []any{"x"}, "m": map[string]any{"k": true}}
		out, err := d.Run(context.Background(), stepstest.NewCall(t, d, with))
		require.NoError(t, err)
		assert.Equal(t, steps.Outputs(with), out)
	})
	t.Run("any key passes load checks", func(t *testing.T) {
		assert.Empty(t, d.CheckLiteral(map[string]any{"anything": steps.Dynamic{}, "x": 1}))
		assert.True(t, d.OutputsFromWith)
	})
}
