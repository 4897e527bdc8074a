package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.SessionStore = (*Store)(nil)

// PutSession stores sess under its key.
func (s *Store) PutSession(ctx context.Context, sess state.Session) error {
	data, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO runbook_sessions (key, expires, record) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET expires = EXCLUDED.expires, record = EXCLUDED.record`, sess.Key, sess.Expires, data)
	if err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	return nil
}

// Session returns the session of key.
func (s *Store) Session(ctx context.Context, key string) (state.Session, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM runbook_sessions WHERE key = $1`, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Session{}, fmt.Errorf("get session: %w", state.ErrNotFound)
	}
	if err != nil {
		return state.Session{}, fmt.Errorf("get session: %w", err)
	}
	var out state.Session
	if err := json.Unmarshal(data, &out); err != nil {
		return state.Session{}, fmt.Errorf("get session: %w: %v", state.ErrCorrupt, err)
	}
	return out, nil
}

// DeleteSession deletes the session of key.
func (s *Store) DeleteSession(ctx context.Context, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM runbook_sessions WHERE key = $1`, key); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// PruneSessions deletes the sessions expiring before before.
func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runbook_sessions WHERE expires < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("prune sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
