package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.NotificationStore = (*Store)(nil)

// The notification outbox, created by the first enqueue:
//
//	notifications/<key>                 Notification JSON
//	notifications_created/<t><key>      the listing, newest last
//	notifications_due/<t><key>          messages not sent, by DueAt
var (
	bucketNotifications        = []byte("notifications")
	bucketNotificationsCreated = []byte("notifications_created")
	bucketNotificationsDue     = []byte("notifications_due")
)

// EnqueueNotifications inserts the messages whose key is absent.
func (s *Store) EnqueueNotifications(ctx context.Context, ns []state.Notification) ([]string, error) {
	var added []string
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		added = nil
		b, created, due, err := notificationBuckets(tx)
		if err != nil {
			return err
		}
		now := s.now()
		for _, n := range ns {
			if n.Key == "" {
				return errors.New("a notification needs a key")
			}
			if b.Get([]byte(n.Key)) != nil || slices.Contains(added, n.Key) {
				continue
			}
			n.Status, n.Attempts, n.LastError, n.ClaimedBy, n.SentAt = state.NotifyPending, 0, "", "", time.Time{}
			if n.CreatedAt.IsZero() {
				n.CreatedAt = now
			}
			n.DueAt = now
			if err := putNotification(b, &n); err != nil {
				return err
			}
			if err := created.Put(createdKey(n.CreatedAt, n.Key), nil); err != nil {
				return err
			}
			if err := due.Put(createdKey(n.DueAt, n.Key), nil); err != nil {
				return err
			}
			added = append(added, n.Key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue notifications: %w", err)
	}
	return added, nil
}

// ClaimNotifications takes the due messages for claimer. A look in a read
// transaction first keeps a sender's polls of an idle outbox from writing
// (and syncing) the file.
func (s *Store) ClaimNotifications(ctx context.Context, claimer string, limit int, lease time.Duration) ([]state.Notification, error) {
	var out []state.Notification
	anyDue := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if due := tx.Bucket(bucketNotificationsDue); due != nil {
			k, _ := due.Cursor().First()
			anyDue = k != nil && bytes.Compare(k, createdKey(s.now(), "\xff")) <= 0
		}
		return nil
	})
	if err != nil || !anyDue {
		return nil, err
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		out = nil
		if tx.Bucket(bucketNotifications) == nil {
			return nil
		}
		b, _, due, err := notificationBuckets(tx)
		if err != nil {
			return err
		}
		now := s.now()
		bound := createdKey(now, "\xff")
		var keys [][]byte
		c := due.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, bound) <= 0 && len(keys) < limit; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			n, err := getNotification(b, k[8:])
			if err != nil {
				return err
			}
			if err := due.Delete(k); err != nil {
				return err
			}
			n.ClaimedBy, n.DueAt = claimer, now.Add(lease)
			if err := putNotification(b, n); err != nil {
				return err
			}
			if err := due.Put(createdKey(n.DueAt, n.Key), nil); err != nil {
				return err
			}
			out = append(out, *n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return out, nil
}

// RecordAttempt records the outcome of claimer's attempt.
func (s *Store) RecordAttempt(ctx context.Context, key, claimer string, a state.Attempt) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketNotifications)
		if b == nil {
			return state.ErrNotFound
		}
		due := tx.Bucket(bucketNotificationsDue)
		n, err := getNotification(b, []byte(key))
		if err != nil {
			return err
		}
		if n.Status == state.NotifySent || n.ClaimedBy != claimer {
			return state.ErrClaimLost
		}
		if err := due.Delete(createdKey(n.DueAt, n.Key)); err != nil {
			return err
		}
		n.Attempts++
		if a.Sent {
			n.Status, n.SentAt, n.DueAt = state.NotifySent, s.now(), time.Time{}
		} else {
			n.Status, n.LastError, n.DueAt = state.NotifyFailing, a.Error, s.now().Add(a.RetryIn)
			if err := due.Put(createdKey(n.DueAt, n.Key), nil); err != nil {
				return err
			}
		}
		n.ClaimedBy = ""
		return putNotification(b, n)
	})
	if err != nil {
		return fmt.Errorf("record notification attempt %s: %w", key, err)
	}
	return nil
}

// ListNotifications lists messages newest first.
func (s *Store) ListNotifications(ctx context.Context, f state.NotificationFilter) ([]state.Notification, error) {
	var out []state.Notification
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b, created := tx.Bucket(bucketNotifications), tx.Bucket(bucketNotificationsCreated)
		if b == nil || created == nil {
			return nil
		}
		c := created.Cursor()
		for k, _ := listStart(c, f.Before); k != nil; k, _ = c.Prev() {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := getNotification(b, k[8:])
			if err != nil {
				return err
			}
			if (len(f.Status) > 0 && !slices.Contains(f.Status, n.Status)) || (f.RunID != "" && n.RunID != f.RunID) {
				continue
			}
			out = append(out, *n)
			if f.Limit > 0 && len(out) >= f.Limit {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	return out, nil
}

// GetNotification returns the message of key.
func (s *Store) GetNotification(ctx context.Context, key string) (*state.Notification, error) {
	var out *state.Notification
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketNotifications)
		if b == nil {
			return state.ErrNotFound
		}
		n, err := getNotification(b, []byte(key))
		out = n
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get notification %s: %w", key, err)
	}
	return out, nil
}

// PruneNotifications deletes the messages sent before before.
func (s *Store) PruneNotifications(ctx context.Context, before time.Time) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		b, created := tx.Bucket(bucketNotifications), tx.Bucket(bucketNotificationsCreated)
		if b == nil || created == nil {
			return nil
		}
		var gone []*state.Notification
		err := b.ForEach(func(k, v []byte) error {
			var m state.Notification
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("%w: notification %s: %v", state.ErrCorrupt, k, err)
			}
			if m.Status == state.NotifySent && m.SentAt.Before(before) {
				gone = append(gone, &m)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, m := range gone {
			if err := b.Delete([]byte(m.Key)); err != nil {
				return err
			}
			if err := created.Delete(createdKey(m.CreatedAt, m.Key)); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune notifications: %w", err)
	}
	return n, nil
}

func notificationBuckets(tx *bbolt.Tx) (b, created, due *bbolt.Bucket, err error) {
	if b, err = tx.CreateBucketIfNotExists(bucketNotifications); err != nil {
		return
	}
	if created, err = tx.CreateBucketIfNotExists(bucketNotificationsCreated); err != nil {
		return
	}
	due, err = tx.CreateBucketIfNotExists(bucketNotificationsDue)
	return
}

func getNotification(b *bbolt.Bucket, key []byte) (*state.Notification, error) {
	v := b.Get(key)
	if v == nil {
		return nil, state.ErrNotFound
	}
	var n state.Notification
	if err := json.Unmarshal(v, &n); err != nil {
		return nil, fmt.Errorf("%w: notification %s: %v", state.ErrCorrupt, key, err)
	}
	return &n, nil
}

func putNotification(b *bbolt.Bucket, n *state.Notification) error {
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode notification %s: %w", n.Key, err)
	}
	return b.Put([]byte(n.Key), data)
}

// exportNotifications lists the outbox oldest first (state.Exporter).
func exportNotifications(tx *bbolt.Tx, fn func(state.Record) error) error {
	b, created := tx.Bucket(bucketNotifications), tx.Bucket(bucketNotificationsCreated)
	if b == nil || created == nil {
		return nil
	}
	return created.ForEach(func(k, _ []byte) error {
		n, err := getNotification(b, k[8:])
		if err != nil {
			return err
		}
		return fn(state.Record{Kind: state.KindNotify, Notify: n})
	})
}

// importNotification writes a message as it was exported, with its
// places in the listing and, when it is not sent, in the due index.
func importNotification(tx *bbolt.Tx, n *state.Notification) error {
	b, created, due, err := notificationBuckets(tx)
	if err != nil {
		return err
	}
	if err := putNotification(b, n); err != nil {
		return err
	}
	if err := created.Put(createdKey(n.CreatedAt, n.Key), nil); err != nil {
		return err
	}
	if n.Status != state.NotifySent {
		return due.Put(createdKey(n.DueAt, n.Key), nil)
	}
	return nil
}
