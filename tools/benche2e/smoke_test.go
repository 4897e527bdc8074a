package benche2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The harness measures each figure on a small load: make bench-e2e's
// numbers come from code the default suite runs.
func TestTheHarnessMeasuresEveryFigureOnBbolt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runbook and starts runbook serve")
	}
	bin := build(t)
	ctx := context.Background()
	c, err := StartCluster(bin, t.TempDir(), "", 1, 10*time.Second)
	require.NoError(t, err)
	defer c.Stop()

	tp, err := c.Deliveries(ctx, 60, 4, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 60, tp.Deliveries)
	assert.Zero(t, tp.Refused)
	assert.Positive(t, tp.PerSec)
	assert.Positive(t, tp.AckP50)
	assert.GreaterOrEqual(t, tp.AckP99, tp.AckP50)

	d, err := c.Dispatch(ctx, 10, 50, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 10, d.N, "every run wrote the times of its two steps")
	assert.Positive(t, d.P50, "step b started after step a")

	ch, err := ShellChain(ctx, bin, t.TempDir(), "", 5, 1)
	require.NoError(t, err)
	assert.Positive(t, ch.Chain)
	assert.Positive(t, ch.Floor)
	assert.Positive(t, ch.Exec)
	assert.Positive(t, ch.Ratio)
}
