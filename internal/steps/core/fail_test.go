package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestFail(t *testing.T) {
	d := desc(t, "fail")
	tests := []struct {
		name string
		with map[string]any
		code fault.Code
	}{
		{"the default code is failed", map[string]any{"message": "stop"}, fault.Failed},
		{"a given code is used", map[string]any{"message": "stop", "code": "throttled"}, fault.Throttled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Run(context.Background(), stepstest.NewCall(t, d, tt.with))
			var se *fault.Error
			require.True(t, errors.As(err, &se))
			assert.Equal(t, tt.code, se.Code)
			assert.Equal(t, "stop", se.Error())
		})
	}
	t.Run("data reaches the error", func(t *testing.T) {
		_, err := d.Run(context.Background(), stepstest.NewCall(t, d, map[string]any{"message": "m", "data": map[string]any{"k": 1}}))
		var se *fault.Error
		require.True(t, errors.As(err, &se))
		assert.Equal(t, map[string]any{"k": 1}, se.Data)
	})
	t.Run("an unknown code is rejected at load", func(t *testing.T) {
		problems := d.CheckLiteral(map[string]any{"message": "m", "code": "oops"})
		require.Len(t, problems, 1)
		assert.Contains(t, problems[0].Error(), `code: must be one of invalid, not_found`)
	})
}
