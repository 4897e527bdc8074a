package benche2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
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
	assert.Positive(t, tp.CPU.Serve, "runbook serve's processor time a run")
	assert.Positive(t, tp.CPU.Self, "the senders'")
	assert.Zero(t, tp.CPU.Database, "no database on bbolt")
	assert.NoError(t, tp.CPUErr)
	assert.Positive(t, tp.CPU.Allows(2))

	sms, err := c.SMS(ctx, 20, 4, 100, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 20, sms.Deliveries)
	assert.Zero(t, sms.Refused)
	assert.Positive(t, sms.PerSec)
	failed, err := c.Failed(ctx)
	require.NoError(t, err)
	assert.Zero(t, failed, "every sms-unsubscribe run added its number")

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

// On PostgreSQL the harness adds the server's processor time, its
// backends' included, to a run's.
func TestTheHarnessMeasuresPostgreSQLsProcessorTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runbook and starts runbook serve on PostgreSQL")
	}
	state := pgtest.DB(t)
	bin := build(t)
	c, err := StartCluster(bin, t.TempDir(), state, 1, 10*time.Second)
	require.NoError(t, err)
	defer c.Stop()

	tp, err := c.Deliveries(context.Background(), 300, 8, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 300, tp.Deliveries)
	require.NoError(t, tp.CPUErr, "the test server runs on this machine")
	assert.Positive(t, tp.CPU.Database, "PostgreSQL's processor time a run")
	assert.Positive(t, tp.CPU.Serve)
	assert.Equal(t, tp.CPU.Serve+tp.CPU.Self+tp.CPU.Database, tp.CPU.All())
}

// The agents' load on a small scale: every run's step ran once on an
// agent, no agent held more than its capacity, and each attempt's
// dispatch latency reached the server's histogram.
func TestTheHarnessMeasuresTheAgentsLoadOnBbolt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runbook and starts runbook serve and agents")
	}
	bin := build(t)
	dir := t.TempDir()
	c, err := StartCluster(bin, dir, "", 1, 10*time.Second)
	require.NoError(t, err)
	defer c.Stop()

	l, err := c.Agents(context.Background(), bin, dir, AgentOptions{Agents: 2, Capacity: 2, Runs: 30, Rate: 60, Timeout: 2 * time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 30, l.Runs)
	assert.Zero(t, l.Refused)
	assert.Equal(t, 30, l.Succeeded, "lost %v, twice %v", l.Lost, l.Twice)
	assert.Empty(t, l.Lost)
	assert.Empty(t, l.Twice)
	assert.Positive(t, l.Most, "the agents' list showed their attempts")
	assert.LessOrEqual(t, l.Most, 2)
	assert.Equal(t, 30, l.Dispatch.N, "each attempt's dispatch latency")
	assert.Positive(t, l.Dispatch.P50)
	assert.GreaterOrEqual(t, l.Dispatch.P99, l.Dispatch.P50)
	assert.Positive(t, l.PerSec)
}
