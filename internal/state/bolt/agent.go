package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.AgentStore = (*Store)(nil)

// The runbook agents' buckets, created at the first registration:
// sessions and assignments by ID (JSON), and the mail between replicas
// keyed by recipient, a NUL and the sequence number (8 bytes, big
// endian). One process holds a bbolt file, so the mail only serves the
// contract; the dispatcher relays within the process.
var (
	bucketAgentSessions    = []byte("agent_sessions")
	bucketAgentAssignments = []byte("agent_assignments")
	bucketAgentMail        = []byte("agent_mail")
)

func agentBuckets(tx *bbolt.Tx) (sessions, assignments *bbolt.Bucket, err error) {
	if sessions, err = tx.CreateBucketIfNotExists(bucketAgentSessions); err != nil {
		return nil, nil, err
	}
	assignments, err = tx.CreateBucketIfNotExists(bucketAgentAssignments)
	return sessions, assignments, err
}

func agentPut(b *bbolt.Bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), data)
}

// agentRecords decodes every record of bucket; what names one in an
// error.
func agentRecords[T any](tx *bbolt.Tx, bucket []byte, what string) ([]T, error) {
	b := tx.Bucket(bucket)
	if b == nil {
		return nil, nil
	}
	var out []T
	err := b.ForEach(func(k, v []byte) error {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%w: %s %s: %v", state.ErrCorrupt, what, k, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

func agentGet(b *bbolt.Bucket, key string, v any) (bool, error) {
	if b == nil {
		return false, nil
	}
	data := b.Get([]byte(key))
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%w: %s: %v", state.ErrCorrupt, key, err)
	}
	return true, nil
}

// OpenAgentSession records a new session.
func (s *Store) OpenAgentSession(ctx context.Context, sess state.AgentSession, lease time.Duration) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b, _, err := agentBuckets(tx)
		if err != nil {
			return err
		}
		now := s.now()
		sess.Registered, sess.Seen, sess.Expires = now, now, now.Add(lease)
		return agentPut(b, sess.ID, sess)
	})
	if err != nil {
		return fmt.Errorf("open agent session: %w", err)
	}
	return nil
}

// RenewAgentSession renews a live session's lease.
func (s *Store) RenewAgentSession(ctx context.Context, id string, draining bool, lease time.Duration) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketAgentSessions)
		var sess state.AgentSession
		found, err := agentGet(b, id, &sess)
		if err != nil {
			return err
		}
		now := s.now()
		if !found || now.After(sess.Expires) {
			return state.ErrAgentGone
		}
		sess.Seen, sess.Expires = now, now.Add(lease)
		sess.Draining = sess.Draining || draining
		return agentPut(b, id, sess)
	})
	if err != nil {
		return fmt.Errorf("renew agent session: %w", err)
	}
	return nil
}

// AgentSessions lists the sessions by ID.
func (s *Store) AgentSessions(ctx context.Context) ([]state.AgentSession, error) {
	var out []state.AgentSession
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		out, err = agentSessions(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list agent sessions: %w", err)
	}
	return out, nil
}

func agentSessions(tx *bbolt.Tx) ([]state.AgentSession, error) {
	return agentRecords[state.AgentSession](tx, bucketAgentSessions, "agent session")
}

// agentAssignments are the assignments, oldest first.
func agentAssignments(tx *bbolt.Tx) ([]state.AgentAssignment, error) {
	out, err := agentRecords[state.AgentAssignment](tx, bucketAgentAssignments, "agent assignment")
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, err
}

// ExpireAgentSessions ends the lapsed sessions (and id's) and marks
// their assignments lost.
func (s *Store) ExpireAgentSessions(ctx context.Context, id string) ([]state.AgentAssignment, error) {
	if id == "" {
		// Read first: most calls end nothing, and a write costs a sync.
		lapsed := false
		err := s.view(ctx, func(tx *bbolt.Tx) error {
			sessions, err := agentSessions(tx)
			now := s.now()
			for _, sess := range sessions {
				lapsed = lapsed || now.After(sess.Expires)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("expire agent sessions: %w", err)
		}
		if !lapsed {
			return nil, nil
		}
	}
	var lost []state.AgentAssignment
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		lost = nil
		sessions, err := agentSessions(tx)
		if err != nil || len(sessions) == 0 {
			return err
		}
		now := s.now()
		ended := map[string]string{}
		for _, sess := range sessions {
			if sess.ID == id || now.After(sess.Expires) {
				ended[sess.ID] = sess.Name
			}
		}
		if len(ended) == 0 {
			return nil
		}
		sb, ab, err := agentBuckets(tx)
		if err != nil {
			return err
		}
		for sid := range ended {
			if err := sb.Delete([]byte(sid)); err != nil {
				return err
			}
		}
		all, err := agentAssignments(tx)
		if err != nil {
			return err
		}
		for _, a := range all {
			name, ok := ended[a.Session]
			if ok && a.Withdrawn {
				if err := deleteAgentAssignment(tx, a.ID); err != nil {
					return err
				}
				continue
			}
			if !ok || a.Ended() {
				continue
			}
			a.Lost = name
			if err := agentPut(ab, a.ID, a); err != nil {
				return err
			}
			lost = append(lost, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire agent sessions: %w", err)
	}
	return lost, nil
}

// AddAgentAssignment records a, or gives the one of its key to a.Owner.
func (s *Store) AddAgentAssignment(ctx context.Context, a state.AgentAssignment) (state.AgentAssignment, error) {
	var out state.AgentAssignment
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		_, b, err := agentBuckets(tx)
		if err != nil {
			return err
		}
		all, err := agentAssignments(tx)
		if err != nil {
			return err
		}
		for _, e := range all {
			if e.RunID == a.RunID && e.Step == a.Step && !e.Withdrawn {
				e.Owner, e.OwnerKey = a.Owner, a.OwnerKey
				out = e
				return agentPut(b, e.ID, e)
			}
		}
		out = a
		out.Created = s.now()
		out.Session, out.Agent, out.Placed, out.Sealed = "", "", time.Time{}, nil
		out.Delivered, out.Acked, out.Withdrawn, out.Result, out.Lost, out.Resend = false, false, false, nil, "", false
		return agentPut(b, out.ID, out)
	})
	if err != nil {
		return state.AgentAssignment{}, fmt.Errorf("add agent assignment: %w", err)
	}
	return out, nil
}

// PlaceAgentAssignments places owner's waiting assignments.
func (s *Store) PlaceAgentAssignments(ctx context.Context, owner string, seal state.AgentSealer) (state.AgentPlacement, error) {
	// Read first: most calls place nothing, and a write costs a sync.
	var held state.AgentPlacement
	some := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		p, waiting, err := agentPlacer(tx, owner, s.now())
		if err != nil || p == nil {
			return err
		}
		held, some = p.Waiting(waiting)
		return nil
	})
	if err != nil {
		return state.AgentPlacement{}, fmt.Errorf("place agent assignments: %w", err)
	}
	if !some {
		return held, nil
	}
	var out state.AgentPlacement
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		now := s.now()
		p, waiting, err := agentPlacer(tx, owner, now)
		if err != nil || p == nil {
			return err
		}
		out = p.Place(waiting, now, seal)
		sb, ab, err := agentBuckets(tx)
		if err != nil {
			return err
		}
		for _, a := range out.Placed {
			if err := agentPut(ab, a.ID, a); err != nil {
				return err
			}
		}
		for _, sess := range p.Turned() {
			if err := agentPut(sb, sess.ID, sess); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return state.AgentPlacement{}, fmt.Errorf("place agent assignments: %w", err)
	}
	return out, nil
}

// agentPlacer reads the sessions and what they hold, and owner's waiting
// assignments, oldest first; no placer when there is no session.
func agentPlacer(tx *bbolt.Tx, owner string, now time.Time) (*state.AgentPlacer, []state.AgentAssignment, error) {
	sessions, err := agentSessions(tx)
	if err != nil || len(sessions) == 0 {
		return nil, nil, err
	}
	all, err := agentAssignments(tx)
	if err != nil {
		return nil, nil, err
	}
	var waiting []state.AgentAssignment
	for _, a := range all {
		if a.Owner == owner && a.Session == "" {
			waiting = append(waiting, a)
		}
	}
	return state.NewAgentPlacer(sessions, state.HeldBySession(all), now), waiting, nil
}

// TakeAgentWork hands a session its new assignments, cancels and
// results asked for again.
func (s *Store) TakeAgentWork(ctx context.Context, session string, running []string) (state.AgentWork, error) {
	// Read first: most polls find nothing, and a write costs a sync.
	some := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		all, err := agentAssignments(tx)
		for _, a := range all {
			some = some || a.Session == session && (a.Withdrawn || a.Resend || !(a.Delivered && a.Acked) && !a.Ended())
		}
		return err
	})
	if err != nil {
		return state.AgentWork{}, fmt.Errorf("take agent work: %w", err)
	}
	if !some {
		return state.AgentWork{}, nil
	}
	var work state.AgentWork
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		work = state.AgentWork{}
		all, err := agentAssignments(tx)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketAgentAssignments)
		for _, a := range all {
			switch {
			case a.Session != session:
			case a.Withdrawn:
				work.Cancels = append(work.Cancels, a.ID)
				if err := deleteAgentAssignment(tx, a.ID); err != nil {
					return err
				}
			case a.Resend:
				work.Resends = append(work.Resends, a.ID)
				a.Resend = false
				if err := agentPut(b, a.ID, a); err != nil {
					return err
				}
			case a.Ended() || a.Delivered && a.Acked:
			case a.Delivered && slices.Contains(running, a.ID):
				a.Acked = true
				if err := agentPut(b, a.ID, a); err != nil {
					return err
				}
			default: // not delivered, or its answer was lost
				a.Delivered = true
				if err := agentPut(b, a.ID, a); err != nil {
					return err
				}
				work.Offers = append(work.Offers, a)
			}
		}
		return nil
	})
	if err != nil {
		return state.AgentWork{}, fmt.Errorf("take agent work: %w", err)
	}
	return work, nil
}

// AgentAssignments lists every assignment, oldest first.
func (s *Store) AgentAssignments(ctx context.Context) ([]state.AgentAssignment, error) {
	var out []state.AgentAssignment
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		out, err = agentAssignments(tx)
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
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		found, err := agentGet(tx.Bucket(bucketAgentAssignments), id, &out)
		if err == nil && !found {
			err = state.ErrNotFound
		}
		return err
	})
	if err != nil {
		return state.AgentAssignment{}, fmt.Errorf("get agent assignment %s: %w", id, err)
	}
	return out, nil
}

// FinishAgentAssignment records a held assignment's result.
func (s *Store) FinishAgentAssignment(ctx context.Context, id, session string, result []byte) error {
	return s.changeAgentAssignment(ctx, "finish agent assignment", id, func(tx *bbolt.Tx, a *state.AgentAssignment) error {
		if a == nil || a.Session != session || a.Ended() || a.Withdrawn {
			return state.ErrAgentGone
		}
		a.Result, a.Resend, a.Acked = result, false, true
		return agentPut(tx.Bucket(bucketAgentAssignments), id, a)
	})
}

// ResendAgentResult asks the agent for an assignment's result again.
func (s *Store) ResendAgentResult(ctx context.Context, id string) error {
	return s.changeAgentAssignment(ctx, "resend agent result", id, func(tx *bbolt.Tx, a *state.AgentAssignment) error {
		if a == nil || a.Result == nil {
			return state.ErrAgentGone
		}
		a.Result, a.Resend = nil, true
		return agentPut(tx.Bucket(bucketAgentAssignments), id, a)
	})
}

// WithdrawAgentAssignment gives an assignment up.
func (s *Store) WithdrawAgentAssignment(ctx context.Context, id string) error {
	return s.changeAgentAssignment(ctx, "withdraw agent assignment", id, func(tx *bbolt.Tx, a *state.AgentAssignment) error {
		if a == nil {
			return nil
		}
		_, err := withdrawAgentAssignment(tx, *a)
		return err
	})
}

// changeAgentAssignment reads assignment id and hands it to change (nil
// when there is none), which writes what it changes, in one update; the
// error says what was done (what) to which.
func (s *Store) changeAgentAssignment(ctx context.Context, what, id string, change func(tx *bbolt.Tx, a *state.AgentAssignment) error) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var a state.AgentAssignment
		found, err := agentGet(tx.Bucket(bucketAgentAssignments), id, &a)
		switch {
		case err != nil:
			return err
		case !found:
			return change(tx, nil)
		}
		return change(tx, &a)
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	return nil
}

// PruneAgentAssignments gives up the assignments of runs that ended.
func (s *Store) PruneAgentAssignments(ctx context.Context, grace time.Duration) ([]string, error) {
	// Read first: most calls find nothing, and a write costs a sync.
	some := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		all, err := agentAssignments(tx)
		ended := runEndedBefore(tx, s.now().Add(-grace))
		for _, a := range all {
			some = some || !a.Withdrawn && ended(a.RunID)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prune agent assignments: %w", err)
	}
	if !some {
		return nil, nil
	}
	var sessions []string
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		sessions = nil
		all, err := agentAssignments(tx)
		if err != nil {
			return err
		}
		ended := runEndedBefore(tx, s.now().Add(-grace))
		for _, a := range all {
			if a.Withdrawn || !ended(a.RunID) {
				continue
			}
			marked, err := withdrawAgentAssignment(tx, a)
			if err != nil {
				return err
			}
			if marked {
				sessions = append(sessions, a.Session)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prune agent assignments: %w", err)
	}
	return sessions, nil
}

// runEndedBefore reports whether a run is recorded final (Done) and
// ended before t or has no end time; a run the store does not hold has
// not. It reads each run once.
func runEndedBefore(tx *bbolt.Tx, t time.Time) func(id string) bool {
	ended := map[string]bool{}
	sources := sourcesOf(tx)
	return func(id string) bool {
		done, ok := ended[id]
		if !ok {
			if data := tx.Bucket(bucketRuns).Get([]byte(id)); data != nil {
				r, err := decodeRun(id, data, sources)
				done = err == nil && r.Status.Done() && (r.EndedAt.IsZero() || r.EndedAt.Before(t))
			}
			ended[id] = done
		}
		return done
	}
}

// DeleteAgentAssignment deletes an assignment and its mail.
func (s *Store) DeleteAgentAssignment(ctx context.Context, id string) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error { return deleteAgentAssignment(tx, id) })
	if err != nil {
		return fmt.Errorf("delete agent assignment %s: %w", id, err)
	}
	return nil
}

// withdrawAgentAssignment gives a up: deleted when waiting or ended,
// else marked withdrawn (marked).
func withdrawAgentAssignment(tx *bbolt.Tx, a state.AgentAssignment) (marked bool, err error) {
	if a.Session == "" || a.Ended() {
		return false, deleteAgentAssignment(tx, a.ID)
	}
	a.Withdrawn = true
	return true, agentPut(tx.Bucket(bucketAgentAssignments), a.ID, a)
}

func deleteAgentAssignment(tx *bbolt.Tx, id string) error {
	if b := tx.Bucket(bucketAgentAssignments); b != nil {
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
	}
	_, err := takeMail(tx, id)
	return err
}

func mailPrefix(to string) []byte { return append([]byte(to), 0) }

// PostAgentMail appends mail for m.To.
func (s *Store) PostAgentMail(ctx context.Context, m state.AgentMail) (int64, error) {
	var seq int64
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketAgentMail)
		if err != nil {
			return err
		}
		prefix := mailPrefix(m.To)
		size := len(m.Body)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			size += len(v)
		}
		if size > state.MaxAgentMail {
			return state.ErrAgentMailFull
		}
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		seq = int64(n)
		return b.Put(binary.BigEndian.AppendUint64(prefix, n), m.Body)
	})
	if err != nil {
		return 0, fmt.Errorf("post agent mail: %w", err)
	}
	return seq, nil
}

// AgentMail takes the mail for to.
func (s *Store) AgentMail(ctx context.Context, to string) ([]state.AgentMail, error) {
	var out []state.AgentMail
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var err error
		out, err = takeMail(tx, to)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read agent mail: %w", err)
	}
	return out, nil
}

func takeMail(tx *bbolt.Tx, to string) ([]state.AgentMail, error) {
	b := tx.Bucket(bucketAgentMail)
	if b == nil {
		return nil, nil
	}
	prefix := mailPrefix(to)
	var out []state.AgentMail
	var keys [][]byte
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
		out = append(out, state.AgentMail{Seq: int64(binary.BigEndian.Uint64(k[len(prefix):])), To: to, Body: append([]byte(nil), v...)})
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return nil, err
		}
	}
	return out, nil
}
