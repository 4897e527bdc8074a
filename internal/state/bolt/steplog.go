package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.StepOutput = (*Store)(nil)

// bucketOutput holds the steps' output (state.StepOutput), outside the
// run records: stepoutput/<run id>/<8-byte first seq> -> a chunk, the
// lines of one AppendOutput call of one step attempt (see outputChunk).
// The run's bucket Sequence is its last line's Seq. The bucket is created by the first append, so a
// file of an earlier build gains it without a migration; DeleteRun
// removes a run's bucket with the run.
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
		for rest := lines; len(rest) > 0; {
			n := 1
			for n < len(rest) && rest[n].Step == rest[0].Step && rest[n].Attempt == rest[0].Attempt {
				n++
			}
			data, err := json.Marshal(newChunk(rest[:n]))
			if err != nil {
				return err
			}
			if err := rb.Put(binary.BigEndian.AppendUint64(nil, rest[0].Seq), data); err != nil {
				return err
			}
			rest = rest[n:]
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
			var c outputChunk
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("output chunk %x: %w: %v", k, state.ErrCorrupt, err)
			}
			if !f.Matches(c.Step) {
				continue
			}
			chunk, err := c.lines(binary.BigEndian.Uint64(k))
			if err != nil {
				return fmt.Errorf("output chunk %x: %w: %v", k, state.ErrCorrupt, err)
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

// outputChunk is the stored form of consecutive lines of one step attempt:
// what they share once, then per line its time (microseconds after Base),
// its stream (one byte of Streams) and its text. A line costs a dozen
// bytes besides its text, where a JSON object would cost a hundred.
type outputChunk struct {
	Step    string   `json:"s"`
	Attempt int      `json:"a,omitempty"`
	Base    int64    `json:"t"` // Unix nanoseconds of the first line
	Offsets []int64  `json:"d"` // microseconds after Base
	Streams string   `json:"k"` // one byte per line: see streamCodes
	Texts   []string `json:"x"`
	// Other holds the names of streams without a code, by line index.
	Other map[int]string `json:"o,omitempty"`
}

var streamCodes = map[string]byte{state.StreamStdout: 'o', state.StreamStderr: 'e', state.StreamCall: 'c', state.StreamNote: 'n'}

func newChunk(lines []state.OutputLine) outputChunk {
	c := outputChunk{Step: lines[0].Step, Attempt: lines[0].Attempt, Base: lines[0].Time.UnixNano(),
		Offsets: make([]int64, len(lines)), Texts: make([]string, len(lines))}
	codes := make([]byte, len(lines))
	for i, l := range lines {
		c.Offsets[i] = (l.Time.UnixNano() - c.Base) / 1e3
		c.Texts[i] = l.Text
		code, ok := streamCodes[l.Stream]
		if !ok {
			code = '?'
			if c.Other == nil {
				c.Other = map[int]string{}
			}
			c.Other[i] = l.Stream
		}
		codes[i] = code
	}
	c.Streams = string(codes)
	return c
}

// lines expands the chunk whose first line is number first.
func (c outputChunk) lines(first uint64) ([]state.OutputLine, error) {
	if len(c.Offsets) != len(c.Texts) || len(c.Streams) != len(c.Texts) {
		return nil, fmt.Errorf("%d times, %d streams, %d texts", len(c.Offsets), len(c.Streams), len(c.Texts))
	}
	out := make([]state.OutputLine, len(c.Texts))
	for i := range out {
		stream := c.Other[i]
		for name, code := range streamCodes {
			if c.Streams[i] == code {
				stream = name
			}
		}
		out[i] = state.OutputLine{Seq: first + uint64(i), Time: time.Unix(0, c.Base+c.Offsets[i]*1e3).UTC(), Step: c.Step,
			Attempt: c.Attempt, Stream: stream, Text: c.Texts[i]}
	}
	return out, nil
}
