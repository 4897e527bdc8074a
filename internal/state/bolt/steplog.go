package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.StepOutput = (*Store)(nil)

// bucketOutput holds the steps' output (state.StepOutput), outside the
// run records: stepoutput/<run id>/<8-byte first seq> -> a chunk, the
// lines of one step attempt that one AppendOutput call, or one write of
// step records (their Printed lines), stored (state.OutputChunk). The
// run's bucket Sequence is its last line's Seq. The bucket is created by
// the first append; DeleteRun removes a run's bucket with the run.
var bucketOutput = []byte("stepoutput")

// AppendOutput stores lines as one chunk after the run's last ones.
func (s *Store) AppendOutput(ctx context.Context, runID string, lines []state.OutputLine) error {
	if len(lines) == 0 {
		return nil
	}
	now := s.now()
	for i := range lines {
		lines[i].Seq = uint64(i) + 1 // after the run's last line: set below
		if lines[i].Time.IsZero() {
			lines[i].Time = now
		}
	}
	out, err := encodeOutput(lines)
	if err != nil {
		return fmt.Errorf("append output of run %s: %w", runID, err)
	}
	var last uint64
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketRuns).Get([]byte(runID)) == nil {
			return fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
		}
		var err error
		last, err = putOutput(tx, runID, out)
		return err
	})
	if err != nil {
		return fmt.Errorf("append output of run %s: %w", runID, err)
	}
	for i := range lines {
		lines[i].Seq += last
	}
	return nil
}

// encodedOutput is lines of one run, numbered from 1, encoded as the
// chunks putOutput stores.
type encodedOutput struct {
	chunks [][]byte
	firsts []uint64 // each chunk's first line, from 1
	n      uint64
}

// encodeOutput encodes lines (Seq from 1, consecutive; none: nil) before
// the transaction that stores them, so the writer only puts them.
func encodeOutput(lines []state.OutputLine) (*encodedOutput, error) {
	if len(lines) == 0 {
		return nil, nil
	}
	chunks, firsts := state.OutputChunks(lines)
	out := &encodedOutput{chunks: make([][]byte, len(chunks)), firsts: firsts, n: uint64(len(lines))}
	for i, c := range chunks {
		data, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		out.chunks[i] = data
	}
	return out, nil
}

// putOutput stores out (nil: nothing) after run runID's last line and
// returns that line's number (0: the run had none).
func putOutput(tx *bbolt.Tx, runID string, out *encodedOutput) (last uint64, err error) {
	if out == nil {
		return 0, nil
	}
	top, err := tx.CreateBucketIfNotExists(bucketOutput)
	if err != nil {
		return 0, err
	}
	rb, err := top.CreateBucketIfNotExists([]byte(runID))
	if err != nil {
		return 0, err
	}
	last = rb.Sequence()
	for i, data := range out.chunks {
		if err := rb.Put(binary.BigEndian.AppendUint64(nil, last+out.firsts[i]), data); err != nil {
			return 0, err
		}
	}
	return last, rb.SetSequence(last + out.n)
}

// Output reads the chunks that may hold lines after f.After: the one
// holding After+1 and those after it.
func (s *Store) Output(ctx context.Context, runID string, f state.OutputFilter) ([]state.OutputLine, error) {
	var out []state.OutputLine
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketRuns).Get([]byte(runID)) == nil {
			return fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
		}
		top := tx.Bucket(bucketOutput)
		if top == nil {
			return nil
		}
		rb := top.Bucket([]byte(runID))
		if rb == nil {
			return nil
		}
		c := rb.Cursor()
		start := binary.BigEndian.AppendUint64(nil, f.After+1)
		// The chunk before the first one starting after After may hold
		// After+1.
		k, v := c.Seek(start)
		switch {
		case k == nil:
			k, v = c.Last()
		case !bytes.Equal(k, start):
			if pk, pv := c.Prev(); pk != nil {
				k, v = pk, pv
			} else {
				k, v = c.Seek(start)
			}
		}
		for ; k != nil; k, v = c.Next() {
			var c state.OutputChunk
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("output chunk %x: %w: %v", k, state.ErrCorrupt, err)
			}
			if !f.Matches(c.Step) {
				continue
			}
			chunk, err := c.Lines(binary.BigEndian.Uint64(k))
			if err != nil {
				return err
			}
			for _, l := range chunk {
				if l.Seq <= f.After || !f.Matches(l.Step) {
					continue
				}
				out = append(out, l)
				if f.Limit > 0 && len(out) >= f.Limit {
					return nil
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read output of run %s: %w", runID, err)
	}
	return out, nil
}

// deleteOutput removes a run's output (DeleteRun's transaction).
func deleteOutput(tx *bbolt.Tx, runID string) error {
	top := tx.Bucket(bucketOutput)
	if top == nil || top.Bucket([]byte(runID)) == nil {
		return nil
	}
	return top.DeleteBucket([]byte(runID))
}
