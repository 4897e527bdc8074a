package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestSleep(t *testing.T) {
	d := desc(t, "sleep")

	t.Run("a short sleep waits and reports the duration", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"duration": "50ms"})
		start := time.Now()
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
		assert.Equal(t, "50ms", out["slept"])
		assert.Empty(t, stepstest.HostOf(c).Checkpoints(), "a sub-second sleep is not worth a checkpoint")
	})
	t.Run("a long sleep checkpoints its end before waiting", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"duration": "1h"})
		now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
		c.Now = func() time.Time { return now }
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := d.Run(ctx, c)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var cp struct{ Until time.Time }
		require.NoError(t, json.Unmarshal(stepstest.HostOf(c).LastCheckpoint(), &cp))
		assert.Equal(t, now.Add(time.Hour), cp.Until)
	})
	t.Run("a resumed sleep waits only for what is left", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"duration": "1h"})
		c.Resume = []byte(`{"until":"` + time.Now().Add(100*time.Millisecond).Format(time.RFC3339Nano) + `"}`)
		start := time.Now()
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.GreaterOrEqual(t, time.Since(start), 80*time.Millisecond)
		assert.Equal(t, "1h", out["slept"])
		assert.Empty(t, stepstest.HostOf(c).Checkpoints(), "the deadline is not moved on resume")
	})
	t.Run("a resumed sleep past its end returns at once", func(t *testing.T) {
		c := stepstest.NewCall(t, d, map[string]any{"duration": "1h"})
		c.Resume = []byte(`{"until":"2000-01-01T00:00:00Z"}`)
		start := time.Now()
		_, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), stepstest.Prompt, "not the hour it was set for")
	})
	t.Run("durations are checked", func(t *testing.T) {
		for with, want := range map[string]string{
			"soon": `duration: must be a duration like 30s or 5m (got "soon")`,
			"721h": "duration: must be at most 720h (got 721h)",
		} {
			problems := d.CheckLiteral(map[string]any{"duration": with})
			require.Len(t, problems, 1)
			assert.Equal(t, want, problems[0].Error())
		}
		assert.Empty(t, d.CheckLiteral(map[string]any{"duration": 30}), "integer seconds are accepted")
	})
}
