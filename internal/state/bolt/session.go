package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.SessionStore = (*Store)(nil)

// bucketSessions holds the web UI's sessions by key (the SHA-256 of the
// session ID), created at the first sign-in.
var bucketSessions = []byte("sessions")

// PutSession stores sess under its key.
func (s *Store) PutSession(ctx context.Context, sess state.Session) error {
	data, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSessions)
		if err != nil {
			return err
		}
		return b.Put([]byte(sess.Key), data)
	})
	if err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	return nil
}

// Session returns the session of key.
func (s *Store) Session(ctx context.Context, key string) (state.Session, error) {
	var out state.Session
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		if b == nil {
			return state.ErrNotFound
		}
		v := b.Get([]byte(key))
		if v == nil {
			return state.ErrNotFound
		}
		if err := json.Unmarshal(v, &out); err != nil {
			return fmt.Errorf("%w: session: %v", state.ErrCorrupt, err)
		}
		return nil
	})
	if err != nil {
		return state.Session{}, fmt.Errorf("get session: %w", err)
	}
	return out, nil
}

// DeleteSession deletes the session of key.
func (s *Store) DeleteSession(ctx context.Context, key string) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// PruneSessions deletes the sessions expiring before before.
func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		b := tx.Bucket(bucketSessions)
		if b == nil {
			return nil
		}
		var gone [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var sess state.Session
			if err := json.Unmarshal(v, &sess); err != nil || sess.Expires.Before(before) {
				gone = append(gone, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range gone {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune sessions: %w", err)
	}
	return n, nil
}
