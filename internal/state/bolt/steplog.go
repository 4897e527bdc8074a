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
// lines of one AppendOutput call of one step attempt (state.OutputChunk).
// The run's bucket Sequence is its last line's Seq. The bucket is
// created by the first append; DeleteRun removes a run's bucket with the
// run.
var bucketOutput = []byte("stepoutput")

// AppendOutput stores lines as one chunk after the run's last ones.
func (s *Store) AppendOutput(ctx context.Context, runID string, lines []state.OutputLine) error {
	if len(lines) == 0 {
		return nil
	}
	now := s.now()
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketRuns).Get([]byte(runID)) == nil {
			return fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
		}
		top, err := tx.CreateBucketIfNotExists(bucketOutput)
		if err != nil {
			return err
		}
		rb, err := top.CreateBucketIfNotExists([]byte(runID))
		if err != nil {
			return err
		}
		first := rb.Sequence() + 1
		for i := range lines { // reset on every run of fn (see update)
			lines[i].Seq = first + uint64(i)
			if lines[i].Time.IsZero() {
				lines[i].Time = now
			}
		}
		chunks, firsts := state.OutputChunks(lines)
		for i, c := range chunks {
			data, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if err := rb.Put(binary.BigEndian.AppendUint64(nil, firsts[i]), data); err != nil {
				return err
			}
		}
		return rb.SetSequence(first + uint64(len(lines)) - 1)
	})
	if err != nil {
		return fmt.Errorf("append output of run %s: %w", runID, err)
	}
	return nil
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
