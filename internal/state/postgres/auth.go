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

var _ state.AuthStore = (*Store)(nil)

// CreateToken stores t unless a live token has its name. The row is
// locked while it is checked, so two replicas cannot both create it.
func (s *Store) CreateToken(ctx context.Context, t state.Token) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, err)
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		var old []byte
		err := tx.QueryRow(ctx, `SELECT record FROM runbook_tokens WHERE name = $1 FOR UPDATE`, t.Name).Scan(&old)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			var prev state.Token
			if err := json.Unmarshal(old, &prev); err != nil {
				return fmt.Errorf("%w: token %s: %v", state.ErrCorrupt, t.Name, err)
			}
			if prev.RevokedAt.IsZero() {
				return state.ErrExists
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO runbook_tokens (name, record) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET record = EXCLUDED.record`, t.Name, data)
		return err
	})
	if isUniqueViolation(err, "runbook_tokens_pkey") {
		err = state.ErrExists
	}
	if err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, err)
	}
	return nil
}

// Tokens returns every token by name.
func (s *Store) Tokens(ctx context.Context) ([]state.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT record FROM runbook_tokens ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []state.Token
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		var t state.Token
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, fmt.Errorf("list tokens: %w: %v", state.ErrCorrupt, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken marks the live token name revoked.
func (s *Store) RevokeToken(ctx context.Context, name string, at time.Time, by string) error {
	err := s.changeToken(ctx, name, func(t *state.Token) { t.RevokedAt, t.RevokedBy = at, by })
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", name, err)
	}
	return nil
}

// TouchToken records the live token name's last use.
func (s *Store) TouchToken(ctx context.Context, name string, at time.Time) error {
	err := s.changeToken(ctx, name, func(t *state.Token) {
		if at.After(t.LastUsedAt) {
			t.LastUsedAt = at
		}
	})
	if err != nil {
		return fmt.Errorf("record the use of token %s: %w", name, err)
	}
	return nil
}

// changeToken applies change to the live token name, its row locked.
func (s *Store) changeToken(ctx context.Context, name string, change func(*state.Token)) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		var data []byte
		err := tx.QueryRow(ctx, `SELECT record FROM runbook_tokens WHERE name = $1 FOR UPDATE`, name).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return state.ErrNotFound
		}
		if err != nil {
			return err
		}
		var t state.Token
		if err := json.Unmarshal(data, &t); err != nil {
			return fmt.Errorf("%w: token %s: %v", state.ErrCorrupt, name, err)
		}
		if !t.RevokedAt.IsZero() {
			return state.ErrNotFound
		}
		change(&t)
		if data, err = json.Marshal(t); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE runbook_tokens SET record = $2 WHERE name = $1`, name, data)
		return err
	})
}

// AppendAudit appends records in one transaction; the sequence assigns
// Seq.
func (s *Store) AppendAudit(ctx context.Context, recs ...state.AuditRecord) error {
	if len(recs) == 0 {
		return nil
	}
	now := s.now()
	err := s.write(ctx, func(tx pgx.Tx) error {
		for _, r := range recs {
			if r.Time.IsZero() {
				r.Time = now
			}
			r.Seq = 0
			data, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO runbook_audit (at, record) VALUES ($1, $2)`, r.Time, data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// Audit returns records oldest first.
func (s *Store) Audit(ctx context.Context, f state.AuditFilter) ([]state.AuditRecord, error) {
	var limit *int
	if f.Limit > 0 {
		limit = &f.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, record FROM runbook_audit WHERE seq > $1 AND at >= $2 ORDER BY seq LIMIT $3`,
		int64(f.After), f.Since, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	defer rows.Close()
	var out []state.AuditRecord
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, fmt.Errorf("read audit: %w", err)
		}
		var r state.AuditRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("read audit: %w: %v", state.ErrCorrupt, err)
		}
		r.Seq = uint64(seq)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	return out, nil
}

// PruneAudit deletes the records older than before.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runbook_audit WHERE at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("prune audit: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
