package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.NotificationStore = (*Store)(nil)

// EnqueueNotifications inserts the messages whose key is absent, in one
// transaction: a key another replica inserted first is left as it is.
func (s *Store) EnqueueNotifications(ctx context.Context, ns []state.Notification) ([]string, error) {
	var added []string
	now := s.now()
	err := s.write(ctx, func(tx pgx.Tx) error {
		added = nil
		for _, n := range ns {
			if n.Key == "" {
				return errors.New("a notification needs a key")
			}
			n.Status, n.Attempts, n.LastError, n.ClaimedBy, n.SentAt = state.NotifyPending, 0, "", "", time.Time{}
			if n.CreatedAt.IsZero() {
				n.CreatedAt = now
			}
			n.DueAt = now
			data, err := json.Marshal(n)
			if err != nil {
				return fmt.Errorf("encode notification %s: %w", n.Key, err)
			}
			tag, err := tx.Exec(ctx, `INSERT INTO runbook_notifications (key, run_id, status, created_ns, due_at, record)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO NOTHING`, n.Key, n.RunID, string(n.Status), n.CreatedAt.UnixNano(), n.DueAt, data)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				added = append(added, n.Key)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue notifications: %w", err)
	}
	return added, nil
}

// ClaimNotifications takes the due messages for claimer, skipping the
// rows other senders are claiming.
func (s *Store) ClaimNotifications(ctx context.Context, claimer string, limit int, lease time.Duration) ([]state.Notification, error) {
	var out []state.Notification
	now := s.now()
	err := s.write(ctx, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT record FROM runbook_notifications
WHERE due_at IS NOT NULL AND due_at <= $1 ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED`, now, limit)
		if err != nil {
			return err
		}
		var data []byte
		_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
			var n state.Notification
			if err := json.Unmarshal(data, &n); err != nil {
				return fmt.Errorf("%w: notification: %v", state.ErrCorrupt, err)
			}
			out = append(out, n)
			return nil
		})
		if err != nil {
			return err
		}
		for i := range out {
			n := &out[i]
			n.ClaimedBy, n.DueAt = claimer, now.Add(lease)
			if err := updateNotification(ctx, tx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return out, nil
}

// RecordAttempt records the outcome of claimer's attempt, in one
// transaction that holds the message's row.
func (s *Store) RecordAttempt(ctx context.Context, key, claimer string, a state.Attempt) error {
	now := s.now()
	err := s.write(ctx, func(tx pgx.Tx) error {
		var data []byte
		err := tx.QueryRow(ctx, `SELECT record FROM runbook_notifications WHERE key = $1 FOR UPDATE`, key).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return state.ErrNotFound
		}
		if err != nil {
			return err
		}
		var n state.Notification
		if err := json.Unmarshal(data, &n); err != nil {
			return fmt.Errorf("%w: notification %s: %v", state.ErrCorrupt, key, err)
		}
		if n.Status == state.NotifySent || n.ClaimedBy != claimer {
			return state.ErrClaimLost
		}
		n.Attempts++
		if a.Sent {
			n.Status, n.SentAt, n.DueAt = state.NotifySent, now, time.Time{}
		} else {
			n.Status, n.LastError, n.DueAt = state.NotifyFailing, a.Error, now.Add(a.RetryIn)
		}
		n.ClaimedBy = ""
		return updateNotification(ctx, tx, &n)
	})
	if err != nil {
		return fmt.Errorf("record notification attempt %s: %w", key, err)
	}
	return nil
}

func updateNotification(ctx context.Context, tx pgx.Tx, n *state.Notification) error {
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode notification %s: %w", n.Key, err)
	}
	_, err = tx.Exec(ctx, `UPDATE runbook_notifications SET status = $2, due_at = $3, sent_at = $4, claimed_by = $5, record = $6 WHERE key = $1`,
		n.Key, string(n.Status), nullTime(n.DueAt), nullTime(n.SentAt), n.ClaimedBy, data)
	return err
}

// ListNotifications lists messages newest first, a page being one index
// range from the cursor.
func (s *Store) ListNotifications(ctx context.Context, f state.NotificationFilter) ([]state.Notification, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.Status) > 0 {
		statuses := make([]string, len(f.Status))
		for i, st := range f.Status {
			statuses[i] = string(st)
		}
		where = append(where, "status = ANY("+arg(statuses)+"::text[])")
	}
	if f.RunID != "" {
		where = append(where, "run_id = "+arg(f.RunID), "run_id <> ''")
	}
	if c := f.Before; c != nil {
		where = append(where, "(created_ns, key) < ("+arg(c.CreatedAt.UnixNano())+", "+arg(c.ID)+")")
	}
	sql := "SELECT record FROM runbook_notifications"
	if len(where) > 0 {
		sql += "\nWHERE " + strings.Join(where, " AND ")
	}
	sql += "\nORDER BY created_ns DESC, key DESC"
	if f.Limit > 0 {
		sql += "\nLIMIT " + arg(f.Limit)
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	out := []state.Notification{}
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
		var n state.Notification
		if err := json.Unmarshal(data, &n); err != nil {
			return fmt.Errorf("%w: notification: %v", state.ErrCorrupt, err)
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", classify(err))
	}
	return out, nil
}

// GetNotification returns the message of key.
func (s *Store) GetNotification(ctx context.Context, key string) (*state.Notification, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM runbook_notifications WHERE key = $1`, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get notification %s: %w", key, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get notification %s: %w", key, classify(err))
	}
	var n state.Notification
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("get notification %s: %w: %v", key, state.ErrCorrupt, err)
	}
	return &n, nil
}

// PruneNotifications deletes the messages sent before before.
func (s *Store) PruneNotifications(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runbook_notifications WHERE status = 'sent' AND sent_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("prune notifications: %w", classify(err))
	}
	return int(tag.RowsAffected()), nil
}
