package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runbook/runbook/internal/state"
)

var (
	_ state.Exporter = (*Store)(nil)
	_ state.Importer = (*Store)(nil)
)

// Export calls fn for every record of the database (see state.Exporter),
// in one read-only, repeatable-read transaction: one consistent view,
// however long the export takes. A run's records are read in one round
// trip.
func (s *Store) Export(ctx context.Context, fn func(state.Record) error) error {
	now := s.now()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export %s: %w", s.target, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := exportRuns(ctx, tx, fn); err != nil {
		return fmt.Errorf("export %s: %w", s.target, err)
	}
	rest := []struct {
		query string
		args  []any
		kind  state.Kind
	}{
		{`SELECT id, body FROM runbook_deliveries ORDER BY id`, nil, state.KindDelivery},
		{`SELECT key, value FROM runbook_cursors ORDER BY key`, nil, state.KindCursor},
		{`SELECT key, first_seen, expires_at, value FROM runbook_dedup WHERE expires_at IS NULL OR expires_at > $1 ORDER BY key`, []any{now}, state.KindDedup},
		{`SELECT name, record FROM runbook_tokens ORDER BY name`, nil, state.KindToken},
		{`SELECT seq, record FROM runbook_audit ORDER BY seq`, nil, state.KindAudit},
		{`SELECT key, record FROM runbook_notifications ORDER BY created_ns, key`, nil, state.KindNotify},
		{`SELECT playbook, record FROM runbook_schedule_pauses ORDER BY playbook, trigger`, nil, state.KindPause},
		{`SELECT id, record FROM runbook_run_pauses ORDER BY at_ns, id`, nil, state.KindRunPause},
	}
	for _, q := range rest {
		rows, err := tx.Query(ctx, q.query, q.args...)
		if err != nil {
			return fmt.Errorf("export %s: %s: %w", s.target, q.kind, err)
		}
		for rows.Next() {
			rec, err := scanRecord(q.kind, rows)
			if err == nil {
				err = fn(rec)
			}
			if err != nil {
				rows.Close()
				return fmt.Errorf("export %s: %s: %w", s.target, q.kind, err)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("export %s: %s: %w", s.target, q.kind, err)
		}
	}
	return nil
}

// scanRecord reads one row of the query of kind (see Export).
func scanRecord(kind state.Kind, rows pgx.Rows) (state.Record, error) {
	rec := state.Record{Kind: kind}
	switch kind {
	case state.KindDelivery:
		d := new(state.StoredDelivery)
		rec.Delivery = d
		return rec, rows.Scan(&d.ID, &d.Body)
	case state.KindCursor:
		c := new(state.Cursor)
		rec.Cursor = c
		if err := rows.Scan(&c.Key, &c.Value); err != nil {
			return rec, err
		}
		c.Value = orEmpty(c.Value)
		return rec, nil
	case state.KindDedup:
		d := new(state.DedupKey)
		rec.Dedup = d
		var exp *time.Time
		if err := rows.Scan(&d.Key, &d.FirstSeen, &exp, &d.Value); err != nil {
			return rec, err
		}
		if exp != nil {
			d.Expires = *exp
		}
		return rec, nil
	case state.KindToken:
		var name string
		var data []byte
		if err := rows.Scan(&name, &data); err != nil {
			return rec, err
		}
		rec.Token = new(state.Token)
		return rec, decodeRecord("token "+name, data, rec.Token)
	case state.KindNotify:
		var key string
		var data []byte
		if err := rows.Scan(&key, &data); err != nil {
			return rec, err
		}
		rec.Notify = new(state.Notification)
		return rec, decodeRecord("notification "+key, data, rec.Notify)
	case state.KindPause:
		var playbook string
		var data []byte
		if err := rows.Scan(&playbook, &data); err != nil {
			return rec, err
		}
		rec.Pause = new(state.SchedulePause)
		return rec, decodeRecord("schedule pause of "+playbook, data, rec.Pause)
	case state.KindRunPause:
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return rec, err
		}
		rec.RunPause = new(state.RunPause)
		return rec, decodeRecord("run pause "+id, data, rec.RunPause)
	case state.KindAudit:
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return rec, err
		}
		rec.Audit = new(state.AuditRecord)
		err := decodeRecord(fmt.Sprintf("audit record %d", seq), data, rec.Audit)
		rec.Audit.Seq = uint64(seq)
		return rec, err
	}
	return rec, fmt.Errorf("no query for %s", kind)
}

func decodeRecord(what string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w: %w", what, state.ErrCorrupt, err)
	}
	return nil
}

// exportRuns exports every run, oldest first, each with its records.
func exportRuns(ctx context.Context, tx pgx.Tx, fn func(state.Record) error) error {
	rows, err := tx.Query(ctx, `SELECT id FROM runbook_runs ORDER BY created_ns, id`)
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	for _, id := range ids {
		recs, err := runRecords(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
		for _, rec := range recs {
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// runRecords reads a run and its steps, events, intents and approvals in
// one round trip.
func runRecords(ctx context.Context, tx pgx.Tx, id string) ([]state.Record, error) {
	var run, steps, events, intents, approvals []state.Record
	b := &pgx.Batch{}
	b.Queue(selectRun+` WHERE r.id = $1`, id).QueryRow(func(row pgx.Row) error {
		var rid string
		var record, snapshot []byte
		if err := row.Scan(&rid, &record, &snapshot); err != nil {
			return err
		}
		r, err := decodeRun(rid, record, snapshot)
		if err != nil {
			return err
		}
		run = []state.Record{{Kind: state.KindRun, Run: r}}
		return nil
	})
	b.Queue(`SELECT record FROM runbook_steps WHERE run_id = $1 ORDER BY ord`, id).Query(func(rows pgx.Rows) error {
		var data []byte
		_, err := pgx.ForEachRow(rows, []any{&data}, func() error {
			rec, err := decodeStep(data)
			steps = append(steps, state.Record{Kind: state.KindStep, Step: rec})
			return err
		})
		return err
	})
	b.Queue(`SELECT seq, event FROM runbook_events WHERE run_id = $1 ORDER BY seq`, id).Query(func(rows pgx.Rows) error {
		var seq int64
		var data []byte
		_, err := pgx.ForEachRow(rows, []any{&seq, &data}, func() error {
			ev := &state.RunEvent{RunID: id}
			err := decodeRecord(fmt.Sprintf("event %d", seq), data, &ev.Event)
			ev.Seq = uint64(seq)
			events = append(events, state.Record{Kind: state.KindEvent, Event: ev})
			return err
		})
		return err
	})
	b.Queue(`SELECT step, record FROM runbook_intents WHERE run_id = $1 ORDER BY step`, id).Query(func(rows pgx.Rows) error {
		var step string
		var data []byte
		_, err := pgx.ForEachRow(rows, []any{&step, &data}, func() error {
			in := new(state.Intent)
			intents = append(intents, state.Record{Kind: state.KindIntent, Intent: in})
			return decodeRecord("intent "+step, data, in)
		})
		return err
	})
	b.Queue(`SELECT step, record FROM runbook_approvals WHERE run_id = $1 ORDER BY step`, id).Query(func(rows pgx.Rows) error {
		var step string
		var data []byte
		_, err := pgx.ForEachRow(rows, []any{&step, &data}, func() error {
			a := new(state.Approval)
			approvals = append(approvals, state.Record{Kind: state.KindApproval, Approval: a})
			return decodeRecord("approval "+step, data, a)
		})
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	out := append(run, steps...)
	out = append(out, events...)
	out = append(out, intents...)
	return append(out, approvals...), nil
}

// importEvent inserts event $3 of run $1 under number $2 and takes the
// run's last_seq up to it, in one statement: the event of a run that is
// not there is not inserted (runbook_events has no foreign key, see
// migration 0003).
const importEvent = `WITH r AS (UPDATE runbook_runs SET last_seq = GREATEST(last_seq, $2) WHERE id = $1 RETURNING id)
INSERT INTO runbook_events (run_id, seq, event) SELECT id, $2, $3 FROM r`

// errNotImportedFirst is an imported record of a run that is not there.
var errNotImportedFirst = errors.New("run not imported")

// Import writes records as Export produced them, in one transaction and
// one round trip (see state.Importer): event and audit numbers, creation
// times and dedup times are kept, not assigned.
func (s *Store) Import(ctx context.Context, recs []state.Record) error {
	b := &pgx.Batch{}
	now := s.now()
	for i, rec := range recs {
		if err := queueImport(b, rec, now); err != nil {
			return fmt.Errorf("import into %s: record %d (%s): %w", s.target, i, rec.Kind, err)
		}
	}
	// The audit sequence goes on from the last record imported.
	b.Queue(`SELECT setval(pg_get_serial_sequence('runbook_audit', 'seq'), GREATEST((SELECT max(seq) FROM runbook_audit), 1),
	(SELECT max(seq) IS NOT NULL FROM runbook_audit))`)
	err := s.write(ctx, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	switch {
	case isForeignKeyViolation(err) || errors.Is(err, errNotImportedFirst):
		err = fmt.Errorf("a record of a run not imported first: %w", state.ErrNotFound)
	case isUniqueViolation(err, "runbook_runs_pkey"):
		err = fmt.Errorf("a run ID already taken: %w", state.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("import into %s: %w", s.target, err)
	}
	return nil
}

// queueImport queues the statements that write one record.
func queueImport(b *pgx.Batch, rec state.Record, now time.Time) error {
	switch {
	case rec.Run != nil:
		record, err := encodeRun(rec.Run)
		if err != nil {
			return err
		}
		queueCreateRun(b, rec.Run, record, nil)
	case rec.Step != nil:
		data, err := json.Marshal(rec.Step)
		if err != nil {
			return err
		}
		queueSaveSteps(b, rec.Step.RunID, nil, &stepRows{ids: []string{rec.Step.ID}, statuses: []string{string(rec.Step.Status)}, records: [][]byte{data}})
	case rec.Event != nil:
		ev := rec.Event.Event
		if ev.Seq == 0 {
			return fmt.Errorf("event of run %s without a number", rec.Event.RunID)
		}
		ev.Seq = 0 // the row's seq is the event's number
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		b.Queue(importEvent, rec.Event.RunID, int64(rec.Event.Seq), data).Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() == 0 {
				return errNotImportedFirst
			}
			return nil
		})
	case rec.Intent != nil:
		return queueRunRecord(b, "runbook_intents", rec.Intent.RunID, rec.Intent.Step, rec.Intent)
	case rec.Approval != nil:
		return queueRunRecord(b, "runbook_approvals", rec.Approval.RunID, rec.Approval.Step, rec.Approval)
	case rec.Delivery != nil:
		b.Queue(`INSERT INTO runbook_deliveries (id, body, created_at) VALUES ($1, $2, $3)`, rec.Delivery.ID, orEmpty(rec.Delivery.Body), now)
	case rec.Cursor != nil:
		b.Queue(`INSERT INTO runbook_cursors (key, value) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, rec.Cursor.Key, orEmpty(rec.Cursor.Value))
	case rec.Dedup != nil:
		d := rec.Dedup
		b.Queue(`INSERT INTO runbook_dedup (key, first_seen, expires_at, value) VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE SET first_seen = EXCLUDED.first_seen, expires_at = EXCLUDED.expires_at, value = EXCLUDED.value`,
			d.Key, d.FirstSeen, nullTime(d.Expires), d.Value)
	case rec.Token != nil:
		data, err := json.Marshal(rec.Token)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO runbook_tokens (name, record) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET record = EXCLUDED.record`, rec.Token.Name, data)
	case rec.Audit != nil:
		r := *rec.Audit
		if r.Seq == 0 {
			return fmt.Errorf("audit record without a number")
		}
		seq := int64(r.Seq)
		r.Seq = 0
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO runbook_audit (seq, at, record) VALUES ($1, $2, $3)`, seq, r.Time, data)
	case rec.Notify != nil:
		n := rec.Notify
		data, err := json.Marshal(n)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO runbook_notifications (key, run_id, status, created_ns, due_at, sent_at, claimed_by, record)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, n.Key, n.RunID, string(n.Status), n.CreatedAt.UnixNano(), nullTime(n.DueAt), nullTime(n.SentAt), n.ClaimedBy, data)
	case rec.Pause != nil:
		data, err := json.Marshal(rec.Pause)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO runbook_schedule_pauses (playbook, trigger, record) VALUES ($1, $2, $3)
ON CONFLICT (playbook, trigger) DO UPDATE SET record = EXCLUDED.record`, rec.Pause.Playbook, rec.Pause.Trigger, data)
	case rec.RunPause != nil:
		p := rec.RunPause
		data, err := json.Marshal(p)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO runbook_run_pauses (id, selector, at_ns, record) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET selector = EXCLUDED.selector, at_ns = EXCLUDED.at_ns, record = EXCLUDED.record`, p.ID, pauseSelector(*p), p.At.UnixNano(), data)
	default:
		return fmt.Errorf("a record of kind %q with nothing in it", rec.Kind)
	}
	return nil
}

func queueRunRecord(b *pgx.Batch, table, runID, step string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.Queue(`INSERT INTO `+table+` (run_id, step, record) VALUES ($1, $2, $3)
ON CONFLICT (run_id, step) DO UPDATE SET record = EXCLUDED.record`, runID, step, data)
	return nil
}
