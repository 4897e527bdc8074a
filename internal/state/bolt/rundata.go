package bolt

import (
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// A run's bucket, rundata/<run id>, holds everything of the run but its
// record as plain keys, each starting with a byte naming its kind. With
// no sub-buckets, the bucket of a small run (its first events) is stored
// inline in its parent's leaf: creating a run costs no page of its own.
// The bucket's Sequence is the run's last event number. Events are kept
// in blocks (kindEventBlock, eventblocks.go).
const (
	kindStep     = 's' // s<step id> -> StepRecord (compact, codec.go)
	kindOrder    = 'o' // o<8-byte n> -> step id, n from 1 in first-saved order
	kindIntent   = 'i' // i<step> -> Intent JSON
	kindApproval = 'a' // a<step> -> Approval JSON
)

// runKey is the flat key of a run's value of kind.
func runKey(kind byte, key []byte) []byte {
	k := make([]byte, 1, 1+len(key))
	k[0] = kind
	return append(k, key...)
}

// numKey is the flat key of a numbered value (an event, an order entry).
func numKey(kind byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kind}, n)
}

// runValue returns a run's value of kind under key, or nil.
func runValue(rb *bbolt.Bucket, kind byte, key []byte) []byte {
	return rb.Get(runKey(kind, key))
}

// scanRun calls fn, in key order, for a run's values of kind whose key
// (without the kind byte) is at least from, until fn returns false.
func scanRun(rb *bbolt.Bucket, kind byte, from []byte, fn func(k, v []byte) (more bool, err error)) error {
	c := rb.Cursor()
	for k, v := c.Seek(runKey(kind, from)); k != nil && k[0] == kind; k, v = c.Next() {
		if more, err := fn(k[1:], v); err != nil || !more {
			return err
		}
	}
	return nil
}

// nextOrder returns the order number of a run's next new step: one past
// the last order key (a seek and a step back, whatever the run's size).
func nextOrder(rb *bbolt.Bucket) (uint64, error) {
	k, _ := lastKey(rb, kindOrder)
	if k == nil {
		return 1, nil
	}
	if len(k) != 9 {
		return 0, fmt.Errorf("step order key %q: %w", k, state.ErrCorrupt)
	}
	return binary.BigEndian.Uint64(k[1:]) + 1, nil
}

// lastKey returns a run's last key of kind and its value, or nil: a seek
// past the kind and a step back, whatever the run's size.
func lastKey(rb *bbolt.Bucket, kind byte) (k, v []byte) {
	c := rb.Cursor()
	if k, v = c.Seek([]byte{kind + 1}); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if len(k) == 0 || k[0] != kind {
		return nil, nil
	}
	return k, v
}
