package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.AuthStore = (*Store)(nil)

// Buckets of the auth records, created at their first write (a file that
// never had a token or an audit record has neither): tokens by name, and
// audit records by sequence number (big-endian, the bucket's sequence).
var (
	bucketTokens = []byte("tokens")
	bucketAudit  = []byte("audit")
)

// CreateToken stores t unless a token of its name is live.
func (s *Store) CreateToken(ctx context.Context, t state.Token) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketTokens)
		if err != nil {
			return err
		}
		if old := b.Get([]byte(t.Name)); old != nil {
			var prev state.Token
			if err := json.Unmarshal(old, &prev); err != nil {
				return fmt.Errorf("%w: token %s: %v", state.ErrCorrupt, t.Name, err)
			}
			if prev.RevokedAt.IsZero() {
				return state.ErrExists
			}
		}
		return b.Put([]byte(t.Name), data)
	})
	if err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, err)
	}
	return nil
}

// Tokens returns every token by name.
func (s *Store) Tokens(ctx context.Context) ([]state.Token, error) {
	var out []state.Token
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		out = nil
		b := tx.Bucket(bucketTokens)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var t state.Token
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("%w: token %s: %v", state.ErrCorrupt, k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	if err != nil {
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

// changeToken applies change to the live token name.
func (s *Store) changeToken(ctx context.Context, name string, change func(*state.Token)) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTokens)
		if b == nil {
			return state.ErrNotFound
		}
		v := b.Get([]byte(name))
		if v == nil {
			return state.ErrNotFound
		}
		var t state.Token
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("%w: token %s: %v", state.ErrCorrupt, name, err)
		}
		if !t.RevokedAt.IsZero() {
			return state.ErrNotFound
		}
		change(&t)
		data, err := json.Marshal(t)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), data)
	})
}

// AppendAudit appends records in one transaction.
func (s *Store) AppendAudit(ctx context.Context, recs ...state.AuditRecord) error {
	if len(recs) == 0 {
		return nil
	}
	now := s.now()
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketAudit)
		if err != nil {
			return err
		}
		for _, r := range recs {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			r.Seq = seq
			if r.Time.IsZero() {
				r.Time = now
			}
			data, err := encodeAudit(&r)
			if err != nil {
				return err
			}
			if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), data); err != nil {
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
	var out []state.AuditRecord
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		out = nil
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, f.After+1)); k != nil; k, v = c.Next() {
			r, err := decodeAudit(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if r.Time.Before(f.Since) {
				continue
			}
			out = append(out, r)
			if f.Limit > 0 && len(out) >= f.Limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	return out, nil
}

// PruneAudit deletes the records older than before. Records are appended
// in time order, so it stops at the first record it keeps.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.First() {
			r, err := decodeAudit(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if !r.Time.Before(before) {
				return nil
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit: %w", err)
	}
	return n, nil
}
