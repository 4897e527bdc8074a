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

// eventRows counts the rows of runbook_events of run id, whatever the
// store reads.
func eventRows(t *testing.T, dsn, id string) int {
	t.Helper()
	var n int
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT count(*) FROM runbook_events WHERE run_id = $1`, id).Scan(&n))
	return n
}

// endedRun stores a succeeded run id with three events.
func endedRun(t *testing.T, s *postgres.Store, id string) {
	t.Helper()
	r := &state.Run{ID: id, Playbook: "pb", Status: state.RunRunning}
	require.NoError(t, s.CreateRun(ctx, r, state.Event{Type: "run.created"}))
	require.NoError(t, s.AppendEvents(ctx, id, state.Event{Type: "step.started", Step: "a"}))
	r.Status, r.EndedAt = state.RunSucceeded, time.Now()
	require.NoError(t, s.SaveRun(ctx, r, state.Event{Type: "run.succeeded"}))
}

// A database of the schema's second version, with runs and events, is
// migrated to the third: the events stay, the foreign key goes, and a
// deleted run's events go with it.
func TestADatabaseOfTheSecondVersionKeepsItsEventsAndLosesThemWithTheirRun(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	endedRun(t, s, "r1")
	endedRun(t, s, "r2")
	require.NoError(t, s.Close())

	// Back to version 2: the key as the baseline made it, no trigger.
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `DROP TRIGGER runbook_runs_delete_events ON runbook_runs;
		DROP FUNCTION runbook_delete_events();
		ALTER TABLE runbook_events ADD CONSTRAINT runbook_events_run_id_fkey
			FOREIGN KEY (run_id) REFERENCES runbook_runs (id) ON DELETE CASCADE;
		DELETE FROM runbook_schema_migrations WHERE version = 3`)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, applied(t, dsn))

	s = open(t, dsn, postgres.Options{})
	assert.Equal(t, allVersions(t), applied(t, dsn))
	var keys int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_constraint
		WHERE conrelid = 'runbook_events'::regclass AND contype = 'f'`).Scan(&keys))
	assert.Zero(t, keys, "runbook_events has no foreign key")

	evs, err := s.Events(ctx, "r1", 0, 0)
	require.NoError(t, err)
	assert.Len(t, evs, 3, "the events written before the migration stay")
	require.NoError(t, s.DeleteRun(ctx, "r1"))
	assert.Zero(t, eventRows(t, dsn, "r1"), "a deleted run's events go with it")
	assert.Equal(t, 3, eventRows(t, dsn, "r2"), "another run's stay")
}

// The events go with their runs whoever deletes them: a replica of the
// previous release, or SQL by hand, deleting several at once.
func TestEventsGoWithTheirRunsDeletedBySQL(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	for _, id := range []string{"r1", "r2", "r3"} {
		endedRun(t, s, id)
	}
	_, err := connect(t, dsn).Exec(ctx, `DELETE FROM runbook_runs WHERE id IN ('r1', 'r3')`)
	require.NoError(t, err)
	assert.Zero(t, eventRows(t, dsn, "r1"))
	assert.Zero(t, eventRows(t, dsn, "r3"))
	assert.Equal(t, 3, eventRows(t, dsn, "r2"))
}

// Events committed while their run's deletion waited for its row (the
// writer held it) are deleted with the run: the trigger's DELETE reads
// them; none is left behind without its run.
func TestEventsCommittedWhileTheirRunsDeletionWaitsGoWithIt(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	endedRun(t, s, "r1")

	// The writer: a run's write with its events, as withEvents makes it,
	// left open with the run's row locked.
	writer, err := connect(t, dsn).Begin(ctx)
	require.NoError(t, err)
	_, err = writer.Exec(ctx, `WITH r AS (UPDATE runbook_runs SET last_seq = last_seq + 2 WHERE id = 'r1' RETURNING id, last_seq)
		INSERT INTO runbook_events (run_id, seq, event) SELECT r.id, r.last_seq - 2 + n, '{"type":"late"}' FROM r, generate_series(1, 2) n`)
	require.NoError(t, err)

	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteRun(ctx, "r1") }()

	// Wait until the deletion waits for the writer's lock.
	watch := connect(t, dsn)
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM runbook_runs%'`).Scan(&waiting))
		return waiting == 1
	}, 10*time.Second, 10*time.Millisecond, "the deletion waits for the run's row")
	require.NoError(t, writer.Commit(ctx))

	require.NoError(t, <-deleted)
	assert.Zero(t, eventRows(t, dsn, "r1"), "the events committed during the wait went with the run")
}

// A write of events to a run that is not there inserts none: its
// statement writes the run first (there is no foreign key to refuse it).
func TestEventsOfARunThatIsNotThereAreNotWritten(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	assert.ErrorIs(t, s.AppendEvents(ctx, "ghost", state.Event{Type: "a"}), state.ErrNotFound)
	assert.ErrorIs(t, s.SaveRun(ctx, &state.Run{ID: "ghost", Playbook: "pb", Status: state.RunRunning}, state.Event{Type: "b"}), state.ErrNotFound)
	assert.ErrorIs(t, s.SaveSteps(ctx, []*state.StepRecord{{RunID: "ghost", ID: "a", Status: state.StepRunning}}, state.Event{Type: "c"}), state.ErrNotFound)
	assert.Zero(t, eventRows(t, dsn, "ghost"))
}
