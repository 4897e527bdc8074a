package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// A run's events are kept in blocks: the key E<8-byte seq> holds the
// events numbered from seq on, consecutively, as compactTag then, for each
// event, its compact encoding without the tag, preceded by its length
// (uvarint). An event appended goes at the end of the last block while that
// block is under eventBlockSize bytes, else starts a new one. Each key costs
// bbolt 16 bytes of page element and its own bytes: one key per event would
// be a fifth of a waiting run's bucket.
const (
	kindEventBlock = 'E'
	eventBlockSize = 512
)

// appendEvents appends encoded events (encodeEvent), numbering them from
// the run's next sequence number (from 1, counted by the run bucket's
// Sequence): an encoded event does not hold its number, so the shared
// writer does no encoding work.
func appendEvents(rb *bbolt.Bucket, events [][]byte) error {
	if len(events) == 0 {
		return nil
	}
	return putEvents(rb, rb.Sequence()+1, events)
}

// putEvents writes events numbered from first on, first being one past the
// run's last event (appended to its last block) or later (a new block),
// and sets the run's Sequence to the last.
func putEvents(rb *bbolt.Bucket, first uint64, events [][]byte) error {
	if last := rb.Sequence(); first <= last {
		return fmt.Errorf("event %d: the run has events up to %d", first, last)
	}
	key, block := lastBlock(rb)
	if key == nil || binary.BigEndian.Uint64(key[1:])+uint64(blockLen(block)) != first || len(block) >= eventBlockSize {
		key, block = numKey(kindEventBlock, first), []byte{compactTag}
	} else {
		block = bytes.Clone(block) // a value is only valid until the next write
	}
	for _, ev := range events {
		if !isCompact(ev) {
			return fmt.Errorf("event %d is not compact", first)
		}
		if len(block) >= eventBlockSize {
			if err := rb.Put(key, block); err != nil {
				return err
			}
			key, block = numKey(kindEventBlock, first), []byte{compactTag}
		}
		block = binary.AppendUvarint(block, uint64(len(ev)-1))
		block = append(block, ev[1:]...)
		first++
	}
	if err := rb.Put(key, block); err != nil {
		return err
	}
	return rb.SetSequence(first - 1)
}

// lastBlock returns a run's last event block, or nil.
func lastBlock(rb *bbolt.Bucket) (key, block []byte) {
	k, v := lastKey(rb, kindEventBlock)
	if len(k) != 9 {
		return nil, nil
	}
	return k, v
}

// blockLen counts the events of a block (0 for a damaged one, which then
// gets no more events).
func blockLen(block []byte) int {
	n := 0
	for p := block[1:]; len(p) > 0; n++ {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			return 0
		}
		p = p[k+int(l):]
	}
	return n
}

// scanEvents calls fn, in order, for a run's events numbered from on, until
// fn returns false.
func scanEvents(rb *bbolt.Bucket, from uint64, fn func(ev state.Event) (more bool, err error)) error {
	c := rb.Cursor()
	k, v := c.Seek(numKey(kindEventBlock, from))
	if k == nil || k[0] != kindEventBlock || binary.BigEndian.Uint64(k[1:]) > from {
		// from may lie in the block before; if there is none, start
		// where the seek did.
		if pk, pv := c.Prev(); len(pk) == 9 && pk[0] == kindEventBlock {
			k, v = pk, pv
		} else {
			k, v = c.Seek(numKey(kindEventBlock, from))
		}
	}
	for ; k != nil && k[0] == kindEventBlock; k, v = c.Next() {
		if len(k) != 9 {
			return fmt.Errorf("event block key %q: %w", k, state.ErrCorrupt)
		}
		more, err := scanBlock(binary.BigEndian.Uint64(k[1:]), v, from, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scanBlock calls fn for the events of the block numbered from first on
// whose number is at least from.
func scanBlock(first uint64, block []byte, from uint64, fn func(ev state.Event) (bool, error)) (more bool, err error) {
	if !isCompact(block) {
		return false, fmt.Errorf("event block %d: %w", first, state.ErrCorrupt)
	}
	seq := first
	for p := block[1:]; len(p) > 0; seq++ {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			return false, fmt.Errorf("event block %d: event %d cut short: %w", first, seq, state.ErrCorrupt)
		}
		body := p[k : k+int(l)]
		p = p[k+int(l):]
		if seq < from {
			continue
		}
		ev, err := decodeEventFields(seq, &decoder{b: body})
		if err != nil {
			return false, err
		}
		if more, err := fn(ev); err != nil || !more {
			return false, err
		}
	}
	return true, nil
}
