package postgres_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

func ids(runs []*state.Run) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// seedRuns creates 25 runs, three at each instant, of two playbooks and
// alternating statuses.
func seedRuns(t *testing.T, s *postgres.Store) {
	t.Helper()
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 25 {
		r := &state.Run{
			ID: fmt.Sprintf("run-%02d", i), Playbook: []string{"upgrade", "digest"}[i%2],
			Status:    []state.RunStatus{state.RunSucceeded, state.RunFailed}[i%3%2],
			CreatedAt: base.Add(time.Duration(i/3) * time.Nanosecond), // nanoseconds apart: a timestamptz would tie them
		}
		require.NoError(t, s.CreateRun(ctx, r))
	}
}

func TestPagesOfRunsFollowOnWithoutGapsOrRepeats(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{})
	seedRuns(t, s)
	for _, f := range []state.RunFilter{
		{},
		{Playbook: "upgrade"},
		{Status: []state.RunStatus{state.RunFailed}},
	} {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			all, err := s.ListRuns(ctx, f)
			require.NoError(t, err)
			require.NotEmpty(t, all)
			var paged []*state.Run
			f.Limit = 4
			f.Before = nil
			for range 20 {
				page, err := s.ListRuns(ctx, f)
				require.NoError(t, err)
				if len(page) == 0 {
					break
				}
				paged = append(paged, page...)
				f.Before = state.CursorAfter(page[len(page)-1])
			}
			assert.Equal(t, ids(all), ids(paged))
		})
	}
}

func TestARunCreatedWhilePagingDoesNotShiftThePages(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{})
	seedRuns(t, s)
	first, err := s.ListRuns(ctx, state.RunFilter{Limit: 5})
	require.NoError(t, err)
	require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "newest", Playbook: "upgrade", CreatedAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}))
	next, err := s.ListRuns(ctx, state.RunFilter{Limit: 5, Before: state.CursorAfter(first[4])})
	require.NoError(t, err)
	all, err := s.ListRuns(ctx, state.RunFilter{})
	require.NoError(t, err)
	assert.Equal(t, ids(all[6:11]), ids(next), "the second page follows the first, the new run is before both")
}

// IDs and keys order by bytes, as in the bbolt store, whatever the
// database's collation: "Z" before "a", "B" before "a".
func TestIDsAndKeysOrderByBytes(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{})
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"a", "B", "Z", "é"} {
		require.NoError(t, s.CreateRun(ctx, &state.Run{ID: id, Playbook: "pb", CreatedAt: at}))
		_, _, err := s.AcquireLock(ctx, state.Lock{Key: id, Owner: "r"})
		require.NoError(t, err)
	}
	runs, err := s.ListRuns(ctx, state.RunFilter{})
	require.NoError(t, err)
	assert.Equal(t, []string{"é", "a", "Z", "B"}, ids(runs))
	locks, err := s.Locks(ctx)
	require.NoError(t, err)
	var keys []string
	for _, l := range locks {
		keys = append(keys, l.Key)
	}
	assert.Equal(t, []string{"B", "Z", "a", "é"}, keys)
}

func TestRunsOfOneSourceShareItsSnapshot(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	src := []byte(strings.Repeat("steps: []\n", 500))
	for i := range 3 {
		require.NoError(t, s.CreateRun(ctx, &state.Run{ID: fmt.Sprint("r", i), Playbook: "pb", Hash: "h1", Snapshot: src}))
	}
	var snapshots, inline int
	conn := connect(t, dsn)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM runbook_snapshots`).Scan(&snapshots))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM runbook_runs WHERE snapshot IS NOT NULL`).Scan(&inline))
	assert.Equal(t, 1, snapshots)
	assert.Zero(t, inline)
	r, err := s.GetRun(ctx, "r2")
	require.NoError(t, err)
	assert.Equal(t, src, r.Snapshot)

	t.Run("a source stored under a taken hash keeps its own copy", func(t *testing.T) {
		require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "other", Playbook: "pb", Hash: "h1", Snapshot: []byte("another source")}))
		r, err := s.GetRun(ctx, "other")
		require.NoError(t, err)
		assert.Equal(t, "another source", string(r.Snapshot))
		r, err = s.GetRun(ctx, "r0")
		require.NoError(t, err)
		assert.Equal(t, src, r.Snapshot, "the hash's first source is untouched")
	})

	t.Run("a run saved without its snapshot still reads it by hash", func(t *testing.T) {
		r, err := s.GetRun(ctx, "r1")
		require.NoError(t, err)
		r.Snapshot = nil
		r.Status = state.RunSucceeded
		require.NoError(t, s.SaveRun(ctx, r))
		got, err := s.GetRun(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, src, got.Snapshot)
	})
}

// A webhook payload may hold any JSON string, NUL included: the records
// are stored as json text, which keeps it (jsonb would refuse it).
func TestRecordsKeepEveryCharacterOfTheirStrings(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{})
	odd := "nul\x00, tab\t, quote\", emoji 🙂, invalid-free ünïcode"
	r := &state.Run{ID: "r1", Playbook: "pb", Inputs: map[string]any{"text": odd},
		Trigger: map[string]any{"type": "webhook", "payload": map[string]any{"k": odd}}, CreatedAt: time.Date(2030, 1, 1, 0, 0, 0, 1, time.UTC)}
	require.NoError(t, s.CreateRun(ctx, r, state.Event{Type: "log", Message: odd, Time: r.CreatedAt}))
	got, err := s.GetRun(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, r, got)
	evs, err := s.Events(ctx, "r1", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, odd, evs[0].Message)
}

func TestARunsTriggerIsAColumnForLookups(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb",
		Trigger: map[string]any{"type": "webhook", "route": "gh", "key": "pb/0/hook-7"}}))
	var typ, key string
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT trigger_type, trigger_key FROM runbook_runs WHERE id = 'r1'`).Scan(&typ, &key))
	assert.Equal(t, "webhook", typ)
	assert.Equal(t, "pb/0/hook-7", key)
}

// Each listing shape is served by an index in listing order: no sort of
// the matches, whatever their number, and a page reads a page of rows.
func TestListingsReadAnIndexInOrder(t *testing.T) {
	dsn := pgtest.DB(t)
	open(t, dsn, postgres.Options{})
	conn := connect(t, dsn)
	// With sorting and the other ways of reading disabled, a Sort left in
	// the plan means that no index yields the listing order.
	_, err := conn.Exec(ctx, `SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off`)
	require.NoError(t, err)
	for name, f := range map[string]state.RunFilter{
		"newest":         {Limit: 50},
		"by status":      {Status: []state.RunStatus{state.RunFailed}, Limit: 50},
		"by playbook":    {Playbook: "upgrade", Limit: 50},
		"by parent":      {ParentID: "r1", Limit: 50},
		"by trigger key": {TriggerKey: "upgrade/0/hook-7", Limit: 50},
	} {
		t.Run(name, func(t *testing.T) {
			// A generic plan (what a prepared statement the pool runs
			// often may get) sees no parameter values: the partial
			// indexes must still match.
			for _, plans := range []string{"force_custom_plan", "force_generic_plan"} {
				for _, cursor := range []*state.RunCursor{nil, {CreatedAt: time.Now(), ID: "r9"}} {
					f.Before = cursor
					text := explain(t, conn, plans, f)
					assert.Contains(t, text, "Index Scan Backward using runbook_runs_", text)
					assert.NotContains(t, text, "Sort", text)
					assert.NotRegexp(t, `(?m)^\s*(->\s*)?Filter:`, text, "every condition on runs is an index condition")
				}
			}
		})
	}
	// Succeeded runs, most of the history, are not in the status index:
	// their listing reads the newest runs in order and skips the others.
	for _, plans := range []string{"force_custom_plan", "force_generic_plan"} {
		text := explain(t, conn, plans, state.RunFilter{Status: []state.RunStatus{state.RunSucceeded}, Limit: 50})
		assert.Contains(t, text, "Index Scan Backward using runbook_runs_created", text)
		assert.NotContains(t, text, "Sort", text)
	}
}

// explain returns the plan of f's listing as a prepared statement
// executed under plan_cache_mode plans.
func explain(t *testing.T, conn *pgx.Conn, plans string, f state.RunFilter) string {
	t.Helper()
	sql, args := postgres.ListQuery(f)
	values := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			values[i] = quote(v)
		case []string:
			for j := range v {
				v[j] = quote(v[j])
			}
			values[i] = "ARRAY[" + strings.Join(v, ", ") + "]"
		default:
			values[i] = fmt.Sprint(v)
		}
	}
	_, err := conn.Exec(ctx, "DEALLOCATE ALL; SET plan_cache_mode = "+plans+"; PREPARE listing AS "+sql, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	execute := "EXPLAIN EXECUTE listing"
	if len(values) > 0 {
		execute += "(" + strings.Join(values, ", ") + ")"
	}
	rows, err := conn.Query(ctx, execute, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(plan, "\n")
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// A write is one batch of statements that PostgreSQL runs as one
// transaction: when the run's insert fails on its taken ID, the snapshot
// stored by the statement before is undone with it.
func TestARefusedCreateLeavesNothingBehind(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}))
	err := s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb", Hash: "new-hash", Snapshot: []byte("src")}, state.Event{Type: "run.created"})
	require.ErrorIs(t, err, state.ErrExists)
	var snapshots, events int
	conn := connect(t, dsn)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM runbook_snapshots`).Scan(&snapshots))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM runbook_events`).Scan(&events))
	assert.Zero(t, snapshots)
	assert.Zero(t, events)
}

func TestSavingARunNeverCreatedLeavesNothingBehind(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	err := s.SaveRun(ctx, &state.Run{ID: "ghost", Playbook: "pb", Hash: "h", Snapshot: []byte("src"), CreatedAt: time.Now()}, state.Event{Type: "x"})
	require.ErrorIs(t, err, state.ErrNotFound)
	err = s.SaveSteps(ctx, []*state.StepRecord{{RunID: "ghost", ID: "a"}}, state.Event{Type: "x"})
	require.ErrorIs(t, err, state.ErrNotFound)
	var rows int
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT (SELECT count(*) FROM runbook_snapshots) + (SELECT count(*) FROM runbook_events) + (SELECT count(*) FROM runbook_steps)`).Scan(&rows))
	assert.Zero(t, rows)
}

// A claim changes a run's owner only, which no index holds: its new
// version stays in the row's page and no index takes an entry for it (a
// heap-only update, which PostgreSQL counts per table), also when a
// replica claims many runs at once (one statement, in which no version
// of a row it updates is dead yet to make room).
func TestAClaimRewritesNoIndexEntry(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	require.NoError(t, s.KeepReplica(ctx, "A", state.ReplicaServe, time.Minute))
	const runs = 200
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%03d", i)
		require.NoError(t, s.CreateRun(ctx, &state.Run{ID: ids[i], Playbook: "pb", Status: state.RunPending,
			Trigger: map[string]any{"type": "webhook", "key": "pb/0/" + ids[i]}, Inputs: map[string]any{"number": "+15550100"}}))
	}
	postgres.HoldClaims(s, runs) // the claims meet in the queue, as a delivery group's runs do
	var claims sync.WaitGroup
	for _, id := range ids {
		claims.Go(func() {
			ok, err := s.ClaimRun(ctx, id, "A", false)
			assert.NoError(t, err)
			assert.True(t, ok, id)
		})
	}
	claims.Wait()
	conn := connect(t, dsn)
	var updated, heapOnly int
	waitFor(t, func() bool { // each backend reports its counts when it is idle
		require.NoError(t, conn.QueryRow(ctx, `SELECT pg_stat_get_tuples_updated(c.oid), pg_stat_get_tuples_hot_updated(c.oid)
			FROM pg_class c WHERE c.oid = 'runbook_runs'::regclass`).Scan(&updated, &heapOnly))
		return updated >= runs
	})
	t.Logf("%d of %d updates heap-only", heapOnly, updated)
	assert.Equal(t, runs, updated)
	assert.GreaterOrEqual(t, heapOnly, runs*95/100, "claims that rewrote no index entry, of %d", updated)
}

// Runs' statuses read alone (state.StatusReader) what their records say;
// a run that does not exist is absent.
func TestRunsStatusesReadAlone(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{})
	var _ state.StatusReader = s
	for _, id := range []string{"r1", "r2"} {
		require.NoError(t, s.CreateRun(ctx, &state.Run{ID: id, Playbook: "pb", Status: state.RunPending, CreatedAt: time.Now()}))
	}
	r, err := s.GetRun(ctx, "r2")
	require.NoError(t, err)
	r.Status = state.RunCancelled
	require.NoError(t, s.SaveRun(ctx, r, state.Event{Type: "run.cancelled"}))
	st, err := s.RunStatuses(ctx, []string{"r1", "r2", "ghost"})
	require.NoError(t, err)
	assert.Equal(t, map[string]state.RunStatus{"r1": state.RunPending, "r2": state.RunCancelled}, st)
	st, err = s.RunStatuses(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, st)
}
