package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// countSnapshotInserts makes the database count the rows offered to
// runbook_snapshots (a BEFORE trigger sees a row that the conflict then
// skips too) and returns the count so far.
func countSnapshotInserts(t *testing.T, dsn string) func() int {
	t.Helper()
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `CREATE TABLE snapshot_inserts (n int NOT NULL);
INSERT INTO snapshot_inserts VALUES (0);
CREATE FUNCTION count_snapshot_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE snapshot_inserts SET n = n + 1; RETURN NEW; END $$;
CREATE TRIGGER count_snapshot_insert BEFORE INSERT ON runbook_snapshots
FOR EACH ROW EXECUTE FUNCTION count_snapshot_insert()`)
	require.NoError(t, err)
	return func() int {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT n FROM snapshot_inserts`).Scan(&n))
		return n
	}
}

// A run's writes, grouped (fenced) or alone, store its playbook's
// snapshot once: the store remembers the snapshots it saw committed.
func TestARunsWritesStoreItsSnapshotOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	inserts := countSnapshotInserts(t, dsn)
	src := []byte("version: 1\nname: pb\nsteps: [{id: a, uses: log, with: {message: hi}}]\n")
	r := &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "A", Hash: "h1", Snapshot: src, CreatedAt: time.Now()}
	require.NoError(t, s.CreateRun(ctx, r, state.Event{Type: "run.created"}))
	fenced := state.WithFence(ctx, state.Fence{Owner: "A", Run: "r1"})
	for i := range 4 {
		require.NoError(t, s.SaveRunSteps(fenced, r, []*state.StepRecord{{RunID: "r1", ID: "a", Status: state.StepRunning, Attempts: i + 1}},
			state.Event{Type: "step.started", Step: "a"}))
	}
	r.Status = state.RunSucceeded
	require.NoError(t, s.SaveRun(ctx, r, state.Event{Type: "run.succeeded"}))
	assert.Equal(t, 1, inserts(), "stored with the run's creation, not again by its six writes")

	got, err := open(t, dsn, postgres.Options{}).GetRun(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, src, got.Snapshot)
}

// A snapshot the store saw committed is gone (a database restored under
// a running server): a run's write that did not store it again keeps the
// source in the run's own row, and the run is read whole.
func TestARunWhoseSnapshotIsGoneKeepsItsSource(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	src := []byte("version: 1\nname: pb\nsteps: [{id: a, uses: log, with: {message: hi}}]\n")
	r := &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "A", Hash: "h1", Snapshot: src, CreatedAt: time.Now()}
	require.NoError(t, s.CreateRun(ctx, r))
	_, err := connect(t, dsn).Exec(ctx, `DELETE FROM runbook_snapshots`)
	require.NoError(t, err)

	r.Status = state.RunSucceeded
	require.NoError(t, s.SaveRun(ctx, r, state.Event{Type: "run.succeeded"}))
	var inRow bool
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT snapshot IS NOT NULL FROM runbook_runs WHERE id = 'r1'`).Scan(&inRow))
	assert.True(t, inRow, "the source is kept in the run's row")
	got, err := open(t, dsn, postgres.Options{}).GetRun(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, src, got.Snapshot)
}
