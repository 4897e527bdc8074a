package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.AgentStore = (*Store)(nil)

// sessionRecord is what runbook_agent_sessions.record holds: the parts of
// a session that do not change.
type sessionRecord struct {
	Name     string             `json:"name"`
	Version  string             `json:"version"`
	Addr     string             `json:"addr"`
	Token    string             `json:"token,omitempty"`
	Labels   map[string]string  `json:"labels"`
	Capacity int                `json:"capacity"`
	Limits   []state.AgentLimit `json:"limits,omitempty"`
	Key      []byte             `json:"key"`
}

// assignmentRecord is what runbook_agent_assignments.record holds.
type assignmentRecord struct {
	Type     string            `json:"type"`
	Labels   map[string]string `json:"labels"`
	Playbook string            `json:"playbook,omitempty"`
}

// OpenAgentSession records a new session.
func (s *Store) OpenAgentSession(ctx context.Context, sess state.AgentSession, lease time.Duration) error {
	rec, err := json.Marshal(sessionRecord{Name: sess.Name, Version: sess.Version, Addr: sess.Addr, Token: sess.Token,
		Labels: sess.Labels, Capacity: sess.Capacity, Limits: sess.Limits, Key: sess.Key})
	if err != nil {
		return fmt.Errorf("open agent session: %w", err)
	}
	err = s.retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, `INSERT INTO runbook_agent_sessions (id, registered, seen, expires, draining, record)
VALUES ($1, now(), now(), now() + $2::bigint * interval '1 microsecond', $3, $4)`, sess.ID, lease.Microseconds(), sess.Draining, rec)
		return err
	})
	if err != nil {
		return fmt.Errorf("open agent session: %w", err)
	}
	return nil
}

// RenewAgentSession renews a live session's lease.
func (s *Store) RenewAgentSession(ctx context.Context, id string, draining bool, lease time.Duration) error {
	var n int64
	err := s.retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `UPDATE runbook_agent_sessions
SET seen = now(), expires = now() + $2::bigint * interval '1 microsecond', draining = draining OR $3
WHERE id = $1 AND expires >= now()`, id, lease.Microseconds(), draining)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("renew agent session: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("renew agent session: %w", state.ErrAgentGone)
	}
	return nil
}

const sessionColumns = `id, registered, seen, expires, draining, turn, record`

func scanSession(row pgx.Row) (state.AgentSession, error) {
	var out state.AgentSession
	var rec []byte
	if err := row.Scan(&out.ID, &out.Registered, &out.Seen, &out.Expires, &out.Draining, &out.Turn, &rec); err != nil {
		return out, err
	}
	var r sessionRecord
	if err := json.Unmarshal(rec, &r); err != nil {
		return out, fmt.Errorf("%w: agent session %s: %v", state.ErrCorrupt, out.ID, err)
	}
	out.Name, out.Version, out.Addr, out.Token, out.Labels, out.Capacity, out.Limits, out.Key = r.Name, r.Version, r.Addr, r.Token, r.Labels, r.Capacity, r.Limits, r.Key
	return out, nil
}

// querier is a transaction or the pool.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

func querySessions(ctx context.Context, q querier, sql string, args ...any) ([]state.AgentSession, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return collectSessions(rows)
}

func collectSessions(rows pgx.Rows) ([]state.AgentSession, error) {
	defer rows.Close()
	var out []state.AgentSession
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}

// AgentSessions lists the sessions by ID.
func (s *Store) AgentSessions(ctx context.Context) ([]state.AgentSession, error) {
	var out []state.AgentSession
	err := s.retry(ctx, func() error {
		var err error
		out, err = querySessions(ctx, s.pool, `SELECT `+sessionColumns+` FROM runbook_agent_sessions ORDER BY id`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list agent sessions: %w", err)
	}
	return out, nil
}

const assignmentColumns = `id, run_id, step, attempt, owner, owner_key, created, session, agent, placed, sealed, delivered, acked, withdrawn, result, lost, resend, record`

func scanAssignment(row pgx.Row) (state.AgentAssignment, error) {
	var a state.AgentAssignment
	var placed *time.Time
	var rec []byte
	err := row.Scan(&a.ID, &a.RunID, &a.Step, &a.Attempt, &a.Owner, &a.OwnerKey, &a.Created, &a.Session, &a.Agent,
		&placed, &a.Sealed, &a.Delivered, &a.Acked, &a.Withdrawn, &a.Result, &a.Lost, &a.Resend, &rec)
	if err != nil {
		return a, err
	}
	if placed != nil {
		a.Placed = *placed
	}
	var r assignmentRecord
	if err := json.Unmarshal(rec, &r); err != nil {
		return a, fmt.Errorf("%w: agent assignment %s: %v", state.ErrCorrupt, a.ID, err)
	}
	a.Type, a.Labels, a.Playbook = r.Type, r.Labels, r.Playbook
	return a, nil
}

func queryAssignments(ctx context.Context, q querier, sql string, args ...any) ([]state.AgentAssignment, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return collectAssignments(rows)
}

func collectAssignments(rows pgx.Rows) ([]state.AgentAssignment, error) {
	defer rows.Close()
	var out []state.AgentAssignment
	for rows.Next() {
		a, err := scanAssignment(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ExpireAgentSessions ends the lapsed sessions (and id's) and marks
// their assignments lost.
func (s *Store) ExpireAgentSessions(ctx context.Context, id string) ([]state.AgentAssignment, error) {
	var lost []state.AgentAssignment
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(agentsLock)); err != nil {
			return err
		}
		var err error
		lost, err = queryAssignments(ctx, tx, `WITH ended AS (
    DELETE FROM runbook_agent_sessions WHERE expires < now() OR id = $1 RETURNING id, record->>'name' AS name
), cancelled AS (
    DELETE FROM runbook_agent_assignments a USING ended WHERE a.session = ended.id AND a.withdrawn
)
UPDATE runbook_agent_assignments a SET lost = ended.name
FROM ended WHERE a.session = ended.id AND a.result IS NULL AND a.lost = '' AND NOT a.withdrawn
RETURNING a.id, a.run_id, a.step, a.attempt, a.owner, a.owner_key, a.created, a.session, a.agent, a.placed, a.sealed,
    a.delivered, a.acked, a.withdrawn, a.result, a.lost, a.resend, a.record`, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expire agent sessions: %w", err)
	}
	return lost, nil
}

// AddAgentAssignment records a, or gives the one of its key to a.Owner.
func (s *Store) AddAgentAssignment(ctx context.Context, a state.AgentAssignment) (state.AgentAssignment, error) {
	rec, err := json.Marshal(assignmentRecord{Type: a.Type, Labels: a.Labels, Playbook: a.Playbook})
	if err != nil {
		return state.AgentAssignment{}, fmt.Errorf("add agent assignment: %w", err)
	}
	var out state.AgentAssignment
	// One statement: an update then an insert let two owners adding the
	// step's assignment at once both find none and both insert, and the
	// second one failed on the step's unique index.
	err = s.write(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanAssignment(tx.QueryRow(ctx, `INSERT INTO runbook_agent_assignments (id, run_id, step, attempt, owner, owner_key, created, record)
VALUES ($1, $2, $3, $4, $5, $6, now(), $7)
ON CONFLICT (run_id, step) WHERE NOT withdrawn DO UPDATE SET owner = EXCLUDED.owner, owner_key = EXCLUDED.owner_key
RETURNING `+assignmentColumns, a.ID, a.RunID, a.Step, a.Attempt, a.Owner, orEmpty(a.OwnerKey), rec))
		return err
	})
	if err != nil {
		return state.AgentAssignment{}, fmt.Errorf("add agent assignment: %w", err)
	}
	return out, nil
}

// agentsLock is the advisory lock that orders the placements against each
// other and against the end of sessions: a placement counts what each
// session holds after the placements before it committed, and never
// places on a session an expiry is ending. A row lock on every session
// did the same but held up their renewals (a poll waited behind a queue
// of placements, long enough under load for its lease to lapse).
const agentsLock = 0x72756e626167 // "runbag"

// PlaceAgentAssignments places owner's waiting assignments, holding the
// agents' lock meanwhile. Every round trip under the lock holds up the
// other replicas' placements, so it makes two: one batch reads what the
// placement needs, one writes what it placed; then the commit.
func (s *Store) PlaceAgentAssignments(ctx context.Context, owner string, seal state.AgentSealer) (state.AgentPlacement, error) {
	var out state.AgentPlacement
	err := s.write(ctx, func(tx pgx.Tx) error {
		out = state.AgentPlacement{}
		var waiting []state.AgentAssignment
		var sessions []state.AgentSession
		var now time.Time
		held := state.AgentHolds{}
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, int64(agentsLock))
		b.Queue(`SELECT `+assignmentColumns+` FROM runbook_agent_assignments
WHERE owner = $1 AND session = '' ORDER BY seq FOR UPDATE`, owner).Query(func(rows pgx.Rows) (err error) {
			waiting, err = collectAssignments(rows)
			return err
		})
		b.Queue(`SELECT ` + sessionColumns + ` FROM runbook_agent_sessions ORDER BY id`).Query(func(rows pgx.Rows) (err error) {
			sessions, err = collectSessions(rows)
			return err
		})
		b.Queue(`SELECT now()`).QueryRow(func(row pgx.Row) error { return row.Scan(&now) })
		b.Queue(`SELECT session, coalesce(record->>'playbook', ''), count(*) FROM runbook_agent_assignments
WHERE session <> '' AND result IS NULL AND lost = '' AND NOT withdrawn GROUP BY 1, 2`).Query(func(rows pgx.Rows) error {
			var sid, pb string
			var n int
			_, err := pgx.ForEachRow(rows, []any{&sid, &pb, &n}, func() error { held.Add(sid, pb, n); return nil })
			return err
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil || len(waiting) == 0 || len(sessions) == 0 {
			return err
		}
		p := state.NewAgentPlacer(sessions, held, now)
		out = p.Place(waiting, now, seal)
		w := &pgx.Batch{}
		for _, a := range out.Placed {
			w.Queue(`UPDATE runbook_agent_assignments SET session = $2, agent = $3, placed = $4, sealed = $5 WHERE id = $1`,
				a.ID, a.Session, a.Agent, a.Placed, a.Sealed)
		}
		for _, sess := range p.Turned() {
			w.Queue(`UPDATE runbook_agent_sessions SET turn = $2 WHERE id = $1`, sess.ID, sess.Turn)
		}
		for _, key := range placedNotices(out.Placed) {
			w.Queue(notifySQL, agentChannel, key)
		}
		if w.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, w).Close()
	})
	if err != nil {
		return state.AgentPlacement{}, fmt.Errorf("place agent assignments: %w", err)
	}
	return out, nil
}

// placedNotices are the Keys of the notices of a placement: the subject
// of each session placed on.
func placedNotices(placed []state.AgentAssignment) []string {
	subjects := make([]string, len(placed))
	for i, a := range placed {
		subjects[i] = state.AgentSessionSubject(a.Session)
	}
	return state.AgentNoticeKeys(subjects)
}

// TakeAgentWork hands a session its new assignments, cancels and
// results asked for again: one batch, one round trip (an agent's poll
// waits on it as its new work is handed over).
func (s *Store) TakeAgentWork(ctx context.Context, session string, running []string) (state.AgentWork, error) {
	var work state.AgentWork
	ids := func(out *[]string) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			var err error
			*out, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		}
	}
	b := &pgx.Batch{}
	// The take commits without waiting for its WAL to reach the disk:
	// that wait was most of a poll's time under load, on the path from a
	// placement to the attempt started. What a database crash may then
	// forget is safe to redo: an offer handed over again (the agent does
	// not start what it runs or ran), a cancel said again, a result asked
	// for again. Any later durable commit, the attempt's result among
	// them, makes the take durable first (the WAL is written in order).
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	// A withdrawn assignment's mail goes with it, in the same statement.
	b.Queue(`WITH cancelled AS (DELETE FROM runbook_agent_assignments WHERE session = $1 AND withdrawn RETURNING id),
mail AS (DELETE FROM runbook_agent_mail WHERE recipient IN (SELECT id FROM cancelled))
SELECT id FROM cancelled`, session).Query(ids(&work.Cancels))
	b.Queue(`UPDATE runbook_agent_assignments SET resend = false WHERE session = $1 AND resend RETURNING id`, session).Query(ids(&work.Resends))
	if len(running) > 0 {
		b.Queue(`UPDATE runbook_agent_assignments SET acked = true WHERE session = $1 AND id = ANY($2) AND NOT acked`, session, running)
	}
	b.Queue(`UPDATE runbook_agent_assignments SET delivered = true
WHERE session = $1 AND NOT (delivered AND acked) AND result IS NULL AND lost = '' AND NOT withdrawn RETURNING `+assignmentColumns, session).Query(func(rows pgx.Rows) error {
		work.Offers = nil
		for rows.Next() {
			a, err := scanAssignment(rows)
			if err != nil {
				return err
			}
			work.Offers = append(work.Offers, a)
		}
		return rows.Err()
	})
	if err := s.send(ctx, b); err != nil {
		return state.AgentWork{}, fmt.Errorf("take agent work: %w", err)
	}
	return work, nil
}

func queryIDs(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// AgentAssignments lists every assignment, oldest first.
func (s *Store) AgentAssignments(ctx context.Context) ([]state.AgentAssignment, error) {
	var out []state.AgentAssignment
	err := s.retry(ctx, func() error {
		var err error
		out, err = queryAssignments(ctx, s.pool, `SELECT `+assignmentColumns+` FROM runbook_agent_assignments ORDER BY seq`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list agent assignments: %w", err)
	}
	return out, nil
}

// AgentAssignment returns assignment id.
func (s *Store) AgentAssignment(ctx context.Context, id string) (state.AgentAssignment, error) {
	var out state.AgentAssignment
	err := s.retry(ctx, func() error {
		var err error
		out, err = scanAssignment(s.pool.QueryRow(ctx, `SELECT `+assignmentColumns+` FROM runbook_agent_assignments WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = state.ErrNotFound
	}
	if err != nil {
		return state.AgentAssignment{}, fmt.Errorf("get agent assignment %s: %w", id, err)
	}
	return out, nil
}

// FinishAgentAssignment records a held assignment's result.
func (s *Store) FinishAgentAssignment(ctx context.Context, id, session string, result []byte) error {
	var n int64
	err := s.retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `UPDATE runbook_agent_assignments SET result = $3, resend = false, acked = true
WHERE id = $1 AND session = $2 AND result IS NULL AND lost = '' AND NOT withdrawn`, id, session, orEmpty(result))
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = state.ErrAgentGone
	}
	if err != nil {
		return fmt.Errorf("finish agent assignment %s: %w", id, err)
	}
	return nil
}

// ResendAgentResult asks the agent for an assignment's result again.
func (s *Store) ResendAgentResult(ctx context.Context, id string) error {
	var n int64
	err := s.retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `UPDATE runbook_agent_assignments SET result = NULL, resend = true WHERE id = $1 AND result IS NOT NULL`, id)
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = state.ErrAgentGone
	}
	if err != nil {
		return fmt.Errorf("resend agent result %s: %w", id, err)
	}
	return nil
}

// WithdrawAgentAssignment gives an assignment up.
func (s *Store) WithdrawAgentAssignment(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM runbook_agent_assignments WHERE id = $1 AND (session = '' OR result IS NOT NULL OR lost <> '')`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() > 0 {
			_, err = tx.Exec(ctx, `DELETE FROM runbook_agent_mail WHERE recipient = $1`, id)
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE runbook_agent_assignments SET withdrawn = true WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("withdraw agent assignment %s: %w", id, err)
	}
	return nil
}

// endedRun selects the assignments a of runs r recorded final more than
// $1 microseconds ago (or with no end time), not withdrawn.
const endedRun = `r.id = a.run_id AND r.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
    AND (r.ended_at IS NULL OR r.ended_at < now() - $1::bigint * interval '1 microsecond') AND NOT a.withdrawn`

// PruneAgentAssignments gives up the assignments of runs that ended.
func (s *Store) PruneAgentAssignments(ctx context.Context, grace time.Duration) ([]string, error) {
	var sessions []string
	err := s.write(ctx, func(tx pgx.Tx) error {
		gone, err := queryIDs(ctx, tx, `DELETE FROM runbook_agent_assignments a USING runbook_runs r
WHERE `+endedRun+` AND (a.session = '' OR a.result IS NOT NULL OR a.lost <> '') RETURNING a.id`, grace.Microseconds())
		if err != nil {
			return err
		}
		if len(gone) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM runbook_agent_mail WHERE recipient = ANY($1)`, gone); err != nil {
				return err
			}
		}
		sessions, err = queryIDs(ctx, tx, `UPDATE runbook_agent_assignments a SET withdrawn = true FROM runbook_runs r
WHERE `+endedRun+` AND a.session <> '' AND a.result IS NULL AND a.lost = '' RETURNING a.session`, grace.Microseconds())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prune agent assignments: %w", err)
	}
	return sessions, nil
}

// DeleteAgentAssignment deletes an assignment and its mail.
func (s *Store) DeleteAgentAssignment(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM runbook_agent_assignments WHERE id = $1`, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM runbook_agent_mail WHERE recipient = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete agent assignment %s: %w", id, err)
	}
	return nil
}

// PostAgentMail appends mail for m.To, refused beyond MaxAgentMail bytes
// waiting.
func (s *Store) PostAgentMail(ctx context.Context, m state.AgentMail) (int64, error) {
	var seq int64
	err := s.retry(ctx, func() error {
		err := s.pool.QueryRow(ctx, `INSERT INTO runbook_agent_mail (recipient, body)
SELECT $1::text, $2::bytea WHERE (SELECT coalesce(sum(length(body)), 0) FROM runbook_agent_mail WHERE recipient = $1::text) + length($2::bytea) <= $3::bigint
RETURNING seq`, m.To, orEmpty(m.Body), state.MaxAgentMail).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return state.ErrAgentMailFull
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("post agent mail: %w", err)
	}
	return seq, nil
}

// AgentMail takes the mail for to.
func (s *Store) AgentMail(ctx context.Context, to string) ([]state.AgentMail, error) {
	var out []state.AgentMail
	err := s.retry(ctx, func() error {
		out = nil
		rows, err := s.pool.Query(ctx, `DELETE FROM runbook_agent_mail WHERE recipient = $1 RETURNING seq, body`, to)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m := state.AgentMail{To: to}
			if err := rows.Scan(&m.Seq, &m.Body); err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read agent mail: %w", err)
	}
	slices.SortFunc(out, func(a, b state.AgentMail) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}
