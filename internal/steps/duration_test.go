package steps_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/steps"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want string
	}{{30 * time.Second, "30s"}, {5 * time.Minute, "5m"}, {90 * time.Minute, "1h30m"}, {720 * time.Hour, "720h"}, {1500 * time.Millisecond, "1.5s"}, {0, "0s"}} {
		t.Run(fmt.Sprintf("%v prints as %s", tt.in, tt.want), func(t *testing.T) {
			assert.Equal(t, tt.want, steps.Duration(tt.in).String())
		})
	}
	t.Run("JSON round trips through the string form", func(t *testing.T) {
		b, err := json.Marshal(steps.Duration(90 * time.Second))
		require.NoError(t, err)
		assert.Equal(t, `"1m30s"`, string(b))
		var d steps.Duration
		require.NoError(t, json.Unmarshal(b, &d))
		assert.Equal(t, 90*time.Second, d.Std())
		require.NoError(t, json.Unmarshal([]byte(`45`), &d))
		assert.Equal(t, 45*time.Second, d.Std(), "an integer is seconds")
		assert.Error(t, json.Unmarshal([]byte(`"soon"`), &d))
	})
}
