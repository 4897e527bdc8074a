package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// takeable is the condition on a run (alias r) that a replica other than
// its owner may execute it: no owner, or an owner that is a serve replica
// whose lease expired. $1 is the claiming replica.
const takeable = `(r.owner = '' OR r.owner = $1 OR EXISTS (
	SELECT 1 FROM runbook_replicas p WHERE p.id = r.owner AND p.expires_at <= now() AND p.kind = 'serve'))`

// takeableSince is the condition on a run (alias r) that ClaimRuns takes
// it for replica $1: no owner, or an owner whose lease expired, but not
// while the database has been up for less than $3, the replicas' lease (a
// lease that expired while the database was down is not expired yet). A
// database restart is not the replica's death: every replica that lives
// renews within a third of its lease once the database answers, and goes
// on with its own runs (a step whose completion it was writing is not
// executed again elsewhere); the runs of one that died are taken a lease
// later. A run replica's run (runbook run) is taken only when its
// playbook says take_over: true (read only for such a run) or when $4
// (server.take_over_run_processes).
const takeableSince = `(r.owner = '' OR r.owner = $1 OR EXISTS (
	SELECT 1 FROM runbook_replicas p WHERE p.id = r.owner AND p.expires_at <= now()
	  AND pg_postmaster_start_time() <= now() - $3 * interval '1 microsecond'
	  AND (p.kind = 'serve' OR $4 OR (r.record->>'take_over') = 'true')))`

// unfinishedTop matches the runs the queue holds; it is the predicate of
// the index runbook_runs_unfinished.
const unfinishedTop = `r.status IN ('pending', 'running', 'waiting', 'suspended') AND r.parent_id = ''`

// ClaimRun implements state.Coordinator. Only the owner column changes:
// the engine records the run with its new owner when it resumes it. A
// run that is replica's already is its to execute whatever its status:
// one parked here and cancelled meanwhile by another replica is resumed
// to end it (its finally steps, its concurrency key). Claims made at the
// same moment go in one statement, which also reads the claimed runs'
// step records for the engine (see claimGroup).
func (s *Store) ClaimRun(ctx context.Context, id, replica string, adopt bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("claim run %s: %w", id, err)
	}
	return s.claims.claim(ctx, id, replica, adopt)
}

// LetGo implements state.Coordinator.
func (s *Store) LetGo(ctx context.Context, replica string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int
	err := s.pool.QueryRow(ctx, `WITH g AS (UPDATE runbook_runs SET owner = ''
			WHERE id = ANY($2) AND owner = $1 AND parent_id = '' RETURNING 1)
		SELECT count(*), pg_notify('runbook_work:' || current_schema(), '') FROM g`, replica, ids).Scan(&n, new(any))
	if err != nil {
		return 0, fmt.Errorf("let runs go: %w", err)
	}
	return n, nil
}

// ownPendingSince is the condition on a run (alias r) of replica $1 that
// ClaimRuns takes it again for it: pending $3 microseconds after it was
// created. A replica commits the runs it starts already claimed
// (runner.Host.Prepare) and launches them once committed; one whose
// commit's answer was not heard is committed, and launched by no one.
const ownPendingSince = `r.status = 'pending' AND ` + createdLeaseAgo

// createdLeaseAgo is the condition that a run (alias r) was created $3
// microseconds (the replicas' lease) ago or more.
const createdLeaseAgo = `r.created_at <= now() - $3 * interval '1 microsecond'`

// sweepPlan keeps ClaimRuns's scan of the unfinished runs an index scan.
// The partial indexes of unfinished runs (runbook_runs_unfinished and its
// playbook twin) keep an entry for every run that ended until a vacuum
// removes it: a thousand a second at a thousand runs a second. The
// planner, which counts only live rows, estimated a handful and took a
// bitmap scan, which reads the table page of every entry, dead or not, at
// every sweep (2,400 to 3,300 pages, up to 116 ms, in EXPLAIN ANALYZE at
// that rate). An index scan marks the entries it finds dead (LP_DEAD) and
// later scans skip them without reading the table, so a sweep costs what
// ended since the last one.
const sweepPlan = `SET LOCAL enable_bitmapscan = off`

// sweepRuns is ClaimRuns's selection of runs for replica $1: at most $2,
// others' and none's, pending ones only once $3 microseconds old or
// owned, its own pending ones once $3 microseconds old, and others' run
// processes' runs when $4 (see takeableSince).
const sweepRuns = `SELECT r.id FROM runbook_runs r
	WHERE ` + unfinishedTop + ` AND (r.owner <> $1 OR ` + ownPendingSince + `) AND ` + takeableSince + `
	  AND (r.status <> 'pending' OR r.owner <> '' OR ` + createdLeaseAgo + `)
	ORDER BY r.created_ns, r.id
	LIMIT $2
	FOR UPDATE OF r SKIP LOCKED`

// ClaimRuns implements state.Coordinator: one transaction selects the runs
// FOR UPDATE SKIP LOCKED, so replicas claiming at once take different
// runs without waiting for each other, and makes them replica's.
func (s *Store) ClaimRuns(ctx context.Context, replica string, limit int, pendingAge time.Duration, processes bool) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var ids []string
	err := s.write(ctx, func(tx pgx.Tx) error {
		ids = ids[:0]
		if _, err := tx.Exec(ctx, sweepPlan); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sweepRuns, replica, limit, pendingAge.Microseconds(), processes)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE runbook_runs SET owner = $1 WHERE id = ANY($2)`, replica, ids)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	return ids, nil
}

// missedRuns is Missed's query: runs $1 and, through the unfinished ones,
// their sub-playbook runs (runbook_runs_parent), each with whether it is
// recorded cancelled and whether it is unfinished with a final answer
// to a step still waiting (the primary keys of runbook_steps and
// runbook_approvals, by run).
const missedRuns = `WITH RECURSIVE mine(id, status) AS (
	SELECT id, status FROM runbook_runs WHERE id = ANY($1)
  UNION
	SELECT c.id, c.status FROM runbook_runs c JOIN mine m ON c.parent_id = m.id
	WHERE c.parent_id <> '' AND m.status IN ('pending', 'running', 'waiting', 'suspended')
)
SELECT m.id, m.status = 'cancelled' FROM mine m
WHERE m.status = 'cancelled' OR m.status IN ('running', 'waiting') AND EXISTS (
	SELECT 1 FROM runbook_steps s
	JOIN runbook_approvals a ON a.run_id = s.run_id AND a.step = s.step_id
	WHERE s.run_id = m.id AND s.status = 'waiting' AND COALESCE(a.record->>'pending', '') <> 'true')`

// Missed implements state.Coordinator.
func (s *Store) Missed(ctx context.Context, runs []string) (state.Missed, error) {
	var m state.Missed
	if len(runs) == 0 {
		return m, nil
	}
	rows, err := s.pool.Query(ctx, missedRuns, runs)
	if err != nil {
		return m, fmt.Errorf("missed notices: %w", err)
	}
	var id string
	var cancelled bool
	_, err = pgx.ForEachRow(rows, []any{&id, &cancelled}, func() error {
		if cancelled {
			m.Cancelled = append(m.Cancelled, id)
		} else {
			m.Answered = append(m.Answered, id)
		}
		return nil
	})
	if err != nil {
		return m, fmt.Errorf("missed notices: %w", err)
	}
	return m, nil
}

// Unfinished implements state.Coordinator, through the index
// runbook_runs_unfinished_playbook.
func (s *Store) Unfinished(ctx context.Context, playbook string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.id FROM runbook_runs r
		WHERE r.playbook = $1 AND `+unfinishedTop+`
		  AND (r.owner = '' OR EXISTS (SELECT 1 FROM runbook_replicas p
		    WHERE p.id = r.owner AND (p.kind = 'serve' OR p.expires_at > now())))
		ORDER BY r.created_ns, r.id`, playbook)
	if err != nil {
		return nil, fmt.Errorf("unfinished runs of %s: %w", playbook, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("unfinished runs of %s: %w", playbook, err)
	}
	return ids, nil
}

// CountUnfinished implements state.Coordinator, over the queue's index
// runbook_runs_unfinished (the runs in flight, not the history).
func (s *Store) CountUnfinished(ctx context.Context) (map[state.RunStatus]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.status, count(*) FROM runbook_runs r WHERE `+unfinishedTop+` GROUP BY r.status`)
	if err != nil {
		return nil, fmt.Errorf("count unfinished runs: %w", err)
	}
	out := map[state.RunStatus]int{}
	var st string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[state.RunStatus(st)] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count unfinished runs: %w", err)
	}
	return out, nil
}
