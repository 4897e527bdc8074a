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

// groupDelivery is a delivery of key with one unit claiming hook (none
// when empty) that creates run id, its body stored under "body/"+id.
func groupDelivery(key, hook, id string) state.Delivery {
	return state.Delivery{Key: key, TTL: time.Hour, ID: "body/" + id, Body: []byte(`{"key":"` + key + `"}`),
		Units: []state.DeliveryUnit{{Claim: hook, ClaimValue: []byte(id),
			Run: &state.Run{ID: id, Playbook: "pb", Status: state.RunPending, Hash: "h1", Snapshot: []byte("name: pb\n"),
				Trigger: map[string]any{"type": "webhook", "key": key}, CreatedAt: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)},
			Events: []state.Event{{Type: "run.created", Time: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}}}},
		Done: func(created []string, earlier [][]byte) []byte { return fmt.Appendf(nil, "%v+%q", created, earlier) }}
}

// commitTogether commits ds at once on s, all waiting for the same group
// commit: first every group worker is kept busy with a delivery whose
// advisory lock another connection holds, then ds are queued, then the
// lock is released. It returns the results of ds, in order.
func commitTogether(t *testing.T, s *postgres.Store, dsn string, ds ...state.Delivery) ([]state.DeliveryResult, []error) {
	t.Helper()
	holder := connect(t, dsn)
	var blockers sync.WaitGroup
	for i := range postgres.GroupWorkers {
		key := fmt.Sprintf("blocker/%d", i)
		_, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, postgres.ClaimLock(key))
		require.NoError(t, err)
		blockers.Go(func() {
			_, err := s.CommitDelivery(ctx, groupDelivery(key, "", "blocker-run-"+key))
			assert.NoError(t, err)
		})
		waitFor(t, func() bool { // the worker waits for the lock
			var n int
			require.NoError(t, holder.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n))
			return n == i+1
		})
	}
	results, errs := make([]state.DeliveryResult, len(ds)), make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { results[i], errs[i] = s.CommitDelivery(ctx, d) })
	}
	waitFor(t, func() bool { return postgres.QueuedDeliveries(s) == len(ds) })
	_, err := holder.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
	require.NoError(t, err)
	wg.Wait()
	blockers.Wait()
	return results, errs
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
	}
}

// transactions returns how many transactions wrote the runs ids (their
// rows' distinct xmin).
func transactions(t *testing.T, dsn string, ids ...string) int {
	t.Helper()
	var n int
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM runbook_runs WHERE id = ANY($1)`, ids).Scan(&n))
	return n
}

func TestNewDeliveriesWaitingTogetherCommitInOneTransaction(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	var ds []state.Delivery
	var ids []string
	for i := range 8 {
		id := fmt.Sprintf("r%d", i)
		ds = append(ds, groupDelivery(fmt.Sprintf("d%d", i), fmt.Sprintf("hook/%d", i), id))
		ids = append(ids, id)
	}
	results, errs := commitTogether(t, s, dsn, ds...)
	for i, res := range results {
		require.NoError(t, errs[i])
		assert.Equal(t, state.DeliveryResult{Created: []string{ids[i]}}, res)
	}
	assert.Equal(t, 1, transactions(t, dsn, ids...), "one transaction for the eight deliveries")

	for i, d := range ds { // each is committed whole, as alone
		got, err := s.GetRun(ctx, ids[i])
		require.NoError(t, err)
		assert.Equal(t, d.Units[0].Run, got)
		evs, err := s.Events(ctx, ids[i], 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Equal(t, uint64(1), evs[0].Seq)
		assert.Equal(t, "run.created", evs[0].Type)
		done, err := s.DedupGet(ctx, d.Key)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("[%s]+[]", ids[i]), string(done))
		hook, err := s.DedupGet(ctx, d.Units[0].Claim)
		require.NoError(t, err)
		assert.Equal(t, ids[i], string(hook))
		body, err := s.GetDelivery(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, d.Body, body)
	}
}

func TestADeliveryOfAGroupWhoseKeyIsRecordedIsCommittedAloneAndTheOthersTogether(t *testing.T) {
	dsn := pgtest.DB(t)
	now := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	s := open(t, dsn, postgres.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	_, err := s.CommitDelivery(ctx, groupDelivery("expired", "hook/expired", "first-of-expired"))
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(2 * time.Hour) // past the one-hour TTL
	mu.Unlock()
	_, err = s.CommitDelivery(ctx, groupDelivery("live", "hook/live", "first-of-live"))
	require.NoError(t, err)

	results, errs := commitTogether(t, s, dsn,
		groupDelivery("a", "hook/a", "ra"),
		groupDelivery("live", "hook/live", "second-of-live"),
		groupDelivery("expired", "hook/expired", "second-of-expired"),
		groupDelivery("b", "hook/b", "rb"))
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, state.DeliveryResult{Created: []string{"ra"}}, results[0])
	assert.Equal(t, state.DeliveryResult{Duplicate: true, Value: []byte(`[first-of-live]+[]`)}, results[1], "a redelivery is a duplicate")
	assert.Equal(t, state.DeliveryResult{Created: []string{"second-of-expired"}}, results[2], "an expired key is claimed again")
	assert.Equal(t, state.DeliveryResult{Created: []string{"rb"}}, results[3])
	_, err = s.GetRun(ctx, "second-of-live")
	require.ErrorIs(t, err, state.ErrNotFound)
	assert.Equal(t, 1, transactions(t, dsn, "ra", "rb"), "the new ones together")
}

func TestTwoDeliveriesOfOneHookWaitingTogetherStartOneRun(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	results, errs := commitTogether(t, s, dsn,
		groupDelivery("d1", "hook/x", "r1"),
		groupDelivery("d2", "hook/x", "r2"),
		groupDelivery("d3", "hook/y", "r3"))
	for _, err := range errs {
		require.NoError(t, err)
	}
	var created []string
	var earlier [][]byte
	for _, res := range results[:2] {
		created = append(created, res.Created...)
		earlier = append(earlier, res.Earlier...)
	}
	require.Len(t, created, 1, "one run for hook x")
	assert.Equal(t, [][]byte{[]byte(created[0])}, earlier, "the other delivery is told which run has the hook")
	assert.Equal(t, []string{"r3"}, results[2].Created)
	runs, err := s.ListRuns(ctx, state.RunFilter{})
	require.NoError(t, err)
	assert.Len(t, runs, 2+postgres.GroupWorkers) // the blockers' runs too
}

func TestARunIDTakenFailsOnlyItsDeliveryOfAGroup(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "taken", Playbook: "pb", Status: state.RunPending}))
	results, errs := commitTogether(t, s, dsn,
		groupDelivery("d1", "hook/1", "r1"),
		groupDelivery("d2", "hook/2", "taken"),
		groupDelivery("d3", "hook/3", "r3"))
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], state.ErrExists)
	require.NoError(t, errs[2])
	assert.Equal(t, []string{"r1"}, results[0].Created)
	assert.Equal(t, []string{"r3"}, results[2].Created)
	for _, key := range []string{"d2", "hook/2"} {
		_, err := s.DedupGet(ctx, key)
		assert.ErrorIs(t, err, state.ErrNotFound, "nothing of the refused delivery is kept: %s", key)
	}
	_, err := s.GetDelivery(ctx, "body/taken")
	assert.ErrorIs(t, err, state.ErrNotFound)
}

// TestAGroupWritesARunAsCreateRunDoes compares, column by column, a run
// committed by a group with the same run created alone.
func TestAGroupWritesARunAsCreateRunDoes(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	grouped := groupDelivery("d1", "", "grouped")
	grouped.Units[0].Run.StartedAt = time.Date(2030, 1, 2, 3, 4, 6, 0, time.UTC)
	grouped.Units[0].Run.ConcurrencyKey, grouped.Units[0].Run.Owner = "ck", "host/1"
	other := groupDelivery("d2", "", "other-source") // a hash first stored with another source
	other.Units[0].Run.Snapshot = []byte("name: other\n")
	_, errs := commitTogether(t, s, dsn, grouped, other)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	for _, d := range []state.Delivery{grouped, other} {
		alone := *d.Units[0].Run
		alone.ID = "alone-" + alone.ID
		require.NoError(t, s.CreateRun(ctx, &alone, d.Units[0].Events...))
	}
	conn := connect(t, dsn)
	row := func(id string) (cols string) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT (to_jsonb(r) - 'id' - 'record')::text || r.record::jsonb::text
			|| (SELECT json_agg(json_build_array(seq, event::jsonb))::text FROM runbook_events WHERE run_id = r.id)
			FROM runbook_runs r WHERE id = $1`, id).Scan(&cols))
		return cols
	}
	for _, id := range []string{"grouped", "other-source"} {
		assert.Equal(t, strings.ReplaceAll(row("alone-"+id), "alone-", ""), row(id))
	}
}

func TestAHookRecordedUnderAnotherKeyIsSkippedOnlyInItsDeliveryOfAGroup(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	_, err := s.CommitDelivery(ctx, groupDelivery("d0", "hook/x", "r0"))
	require.NoError(t, err)
	results, errs := commitTogether(t, s, dsn,
		groupDelivery("d1", "hook/x", "r1"), // the same hook, another delivery key
		groupDelivery("d2", "hook/y", "r2"))
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Equal(t, state.DeliveryResult{Earlier: [][]byte{[]byte("r0")}}, results[0], "the hook's run is named, none created")
	assert.Equal(t, state.DeliveryResult{Created: []string{"r2"}}, results[1])
	_, err = s.GetRun(ctx, "r1")
	require.ErrorIs(t, err, state.ErrNotFound)
}

// TestAGroupReadsNoDedupKeyButThroughTheIndex checks the plan PostgreSQL
// caches for the group's statement when the table is young (a generic
// plan, as a prepared statement gets after five executions): it must not
// read runbook_dedup whole, which a join of the claims with the table did
// (a hash join over a sequential scan, kept as the table grew).
func TestAGroupReadsNoDedupKeyButThroughTheIndex(t *testing.T) {
	dsn := pgtest.DB(t)
	open(t, dsn, postgres.Options{}) // migrates
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	types := "int[], text[], timestamptz[], timestamptz[], bytea[], int[], text[], text[], text[], text[], text[], text[], text[], text[], " +
		"bigint[], timestamptz[], timestamptz[], timestamptz[], text[], bytea[], json[], bigint[], text[], bigint[], json[], " +
		"int[], text[], bytea[], timestamptz[], bool[], text[], text[], text[], timestamptz[], json[]"
	_, err = conn.Exec(ctx, `PREPARE group_insert (`+types+`) AS `+postgres.GroupInsert)
	require.NoError(t, err)
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE group_insert (`+strings.TrimSuffix(strings.Repeat("NULL, ", 35), ", ")+`)`)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, plan)
	assert.NotContains(t, strings.Join(plan, "\n"), "Seq Scan on runbook_dedup")
}
