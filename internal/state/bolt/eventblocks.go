package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// A run's events are kept in blocks (format 7): the key E<8-byte seq> holds
// the events numbered from seq on, consecutively, as compactTag then, for
// each event, its compact encoding without the tag, preceded by its length
// (uvarint). An event appended goes at the end of the last block while that
// block is under eventBlockSize bytes, else starts a new one. Each key costs
// bbolt 16 bytes of page element and its own bytes: one key per event was
// a fifth of a waiting run's bucket.
//
// Formats up to 6 kept one event per key, e<8-byte seq> (JSON before
// format 4); a file of such a format opened read-only is read as it is,
// and the first open for writing puts its events in blocks (blockEvents,
// called by upgrade).
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
// fn returns false: from blocks, or from the one-event keys of a file of
// format 6 or earlier opened read-only.
func scanEvents(rb *bbolt.Bucket, from uint64, fn func(ev state.Event) (more bool, err error)) error {
	if legacySub(rb, kindEvent) != nil || hasFlatEvents(rb) {
		return scanRun(rb, kindEvent, binary.BigEndian.AppendUint64(nil, from), func(k, v []byte) (bool, error) {
			ev, err := decodeEvent(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return false, err
			}
			return fn(ev)
		})
	}
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

// hasFlatEvents reports whether a run keeps one event per key (formats 3
// to 6).
func hasFlatEvents(rb *bbolt.Bucket) bool {
	k, _ := rb.Cursor().Seek([]byte{kindEvent})
	return k != nil && k[0] == kindEvent
}

// blockEvents puts a (flat) run's one-event keys into blocks, keeping
// their numbers, in the caller's transaction.
func blockEvents(rb *bbolt.Bucket) error {
	if !hasFlatEvents(rb) {
		return nil
	}
	type event struct {
		seq  uint64
		data []byte
	}
	var evs []event
	err := scanRun(rb, kindEvent, nil, func(k, v []byte) (bool, error) {
		if len(k) != 8 {
			return false, fmt.Errorf("event key %q: %w", k, state.ErrCorrupt)
		}
		seq := binary.BigEndian.Uint64(k)
		ev, err := decodeEvent(seq, v)
		if err != nil {
			return false, err
		}
		data, err := encodeEvent(&ev)
		if err != nil {
			return false, err
		}
		evs = append(evs, event{seq, data})
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := rb.Delete(numKey(kindEvent, e.seq)); err != nil {
			return err
		}
	}
	last := rb.Sequence()
	if err := rb.SetSequence(0); err != nil {
		return err
	}
	// Consecutive numbers share blocks; a gap starts a new one.
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].seq == evs[j-1].seq+1 {
			j++
		}
		run := make([][]byte, 0, j-i)
		for _, e := range evs[i:j] {
			run = append(run, e.data)
		}
		if err := putEvents(rb, evs[i].seq, run); err != nil {
			return err
		}
		i = j
	}
	return rb.SetSequence(max(last, rb.Sequence()))
}
