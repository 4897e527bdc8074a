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
	out, err := state.EncodeOutput(lines, s.now())
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
		lines[i].Seq += last // numbered from 1 by EncodeOutput
	}
	return nil
}

// putOutput stores chunks (state.EncodeOutput; none: nothing) after run
// runID's last line and returns that line's number (0: the run had none).
func putOutput(tx *bbolt.Tx, runID string, chunks []state.EncodedChunk) (last uint64, err error) {
	if len(chunks) == 0 {
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
	for _, c := range chunks {
		if err := rb.Put(binary.BigEndian.AppendUint64(nil, last+c.First), c.Data); err != nil {
			return 0, err
		}
	}
	return last, rb.SetSequence(last + chunks[len(chunks)-1].Last)
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
