package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// A run's bucket, rundata/<run id>, holds everything of the run but its
// record as plain keys, each starting with a byte naming its kind (format
// 3). With no sub-buckets, the bucket of a small run (its first events) is
// stored inline in its parent's leaf: creating a run costs no page of its
// own. The bucket's Sequence is the run's last event number.
//
// Files of formats 1 and 2 hold one sub-bucket per kind instead. Open
// flattens them at the first open for writing (upgrade), so writers
// know only the flat layout; a file opened read-only cannot be converted,
// so readers use a kind's sub-bucket when the run's bucket has one
// (runValue, scanRun). A flat key never passes for a sub-bucket: the step
// "teps" is stored under "steps", but bbolt's Bucket finds only buckets.
const (
	kindStep     = 's' // s<step id> -> StepRecord (compact, codec.go; JSON before format 4)
	kindOrder    = 'o' // o<8-byte n> -> step id, n from 1 in first-saved order
	kindEvent    = 'e' // e<8-byte seq> -> Event, seq from 1 (formats 3 to 6; JSON before 4; see eventblocks.go)
	kindIntent   = 'i' // i<step> -> Intent JSON
	kindApproval = 'a' // a<step> -> Approval JSON
)

// legacySubs are the sub-buckets of a run's bucket before format 3, with
// the kind of their keys (which the flat keys keep as they are).
var legacySubs = []struct {
	kind byte
	name []byte
}{
	{kindStep, []byte("steps")},
	{kindOrder, []byte("steporder")},
	{kindEvent, []byte("events")},
	{kindIntent, []byte("intents")},
	{kindApproval, []byte("approvals")},
}

func legacySub(rb *bbolt.Bucket, kind byte) *bbolt.Bucket {
	for _, l := range legacySubs {
		if l.kind == kind {
			return rb.Bucket(l.name)
		}
	}
	return nil
}

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
	return runValues(rb, kind)(key)
}

// runValues returns a function that gets a run's values of kind, having
// looked for the kind's sub-bucket once.
func runValues(rb *bbolt.Bucket, kind byte) func(key []byte) []byte {
	if sub := legacySub(rb, kind); sub != nil {
		return sub.Get
	}
	return func(key []byte) []byte { return rb.Get(runKey(kind, key)) }
}

// scanRun calls fn, in key order, for a run's values of kind whose key
// (without the kind byte) is at least from, until fn returns false.
func scanRun(rb *bbolt.Bucket, kind byte, from []byte, fn func(k, v []byte) (more bool, err error)) error {
	if sub := legacySub(rb, kind); sub != nil {
		c := sub.Cursor()
		for k, v := c.Seek(from); k != nil; k, v = c.Next() {
			if more, err := fn(k, v); err != nil || !more {
				return err
			}
		}
		return nil
	}
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

func hasLegacySubs(rb *bbolt.Bucket) bool {
	for _, l := range legacySubs {
		if rb.Bucket(l.name) != nil {
			return true
		}
	}
	return false
}

// flatten moves the values of a run's sub-buckets to flat keys and sets
// the bucket's Sequence to the last event number.
func flatten(rb *bbolt.Bucket) error {
	type entry struct{ k, v []byte }
	var flat []entry
	var lastEvent uint64
	for _, l := range legacySubs {
		sub := rb.Bucket(l.name)
		if sub == nil {
			continue
		}
		if l.kind == kindEvent {
			lastEvent = sub.Sequence()
			if k, _ := sub.Cursor().Last(); len(k) == 8 {
				lastEvent = max(lastEvent, binary.BigEndian.Uint64(k))
			}
		}
		err := sub.ForEach(func(k, v []byte) error {
			if v == nil {
				return fmt.Errorf("%s/%q is a bucket: %w", l.name, k, state.ErrCorrupt)
			}
			flat = append(flat, entry{runKey(l.kind, k), bytes.Clone(v)})
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Every sub-bucket goes before any flat key is written: a flat key
	// may spell a sub-bucket's name.
	for _, l := range legacySubs {
		if rb.Bucket(l.name) == nil {
			continue
		}
		if err := rb.DeleteBucket(l.name); err != nil {
			return err
		}
	}
	for _, e := range flat {
		if err := rb.Put(e.k, e.v); err != nil {
			return err
		}
	}
	return rb.SetSequence(lastEvent)
}
