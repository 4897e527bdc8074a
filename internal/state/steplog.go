package state

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Streams of an OutputLine.
const (
	StreamStdout = "stdout" // a command's standard output
	StreamStderr = "stderr" // a command's standard error
	StreamCall   = "call"   // an API call a step made: method, path, status, duration
	StreamNote   = "note"   // written by runbook itself: the truncation marker
)

// OutputLine is one line of a step's output: a line a shell command
// printed, or an API call a step made. Text is redacted before a line
// reaches a store; it never holds a trailing newline.
type OutputLine struct {
	Seq     uint64    `json:"seq"` // assigned by the store, per run, from 1
	Time    time.Time `json:"time"`
	Step    string    `json:"step"` // step ID, with the item index of a for_each item
	Attempt int       `json:"attempt,omitempty"`
	Stream  string    `json:"stream"`
	Text    string    `json:"text"`
}

// OutputFilter selects output lines: those with Seq > After, of Step (and
// its for_each items, "deploy" matches "deploy[2]") when not empty, at
// most Limit (0: all), in Seq order.
type OutputFilter struct {
	Step  string
	After uint64
	Limit int
}

// Matches reports whether a line of step belongs to the filter's step.
func (f OutputFilter) Matches(step string) bool {
	return f.Step == "" || step == f.Step || (strings.HasPrefix(step, f.Step) && strings.HasPrefix(step[len(f.Step):], "["))
}

// StepOutput is the per-run area that keeps what steps print, outside the
// run and step records: a step printing 100 MB inflates neither the record
// nor whoever reads it. Lines are appended in batches (a store keeps a
// batch as one chunk) and read back by sequence number, so a reader
// follows a live run by asking for the lines after the last it saw.
// Deleting a run deletes its output. It is a part of Store. How much is
// kept per step is the writer's decision (the engine caps it and appends
// a StreamNote line saying what it dropped). The contract suite is
// statetest.RunStepOutput.
type StepOutput interface {
	// AppendOutput stores lines after the run's last ones and sets their
	// Seq; a zero Time is set to now. ErrNotFound when the run does not
	// exist.
	AppendOutput(ctx context.Context, runID string, lines []OutputLine) error
	// Output returns the run's lines f selects; none (no error) for a run
	// without output, ErrNotFound for a run that does not exist.
	Output(ctx context.Context, runID string, f OutputFilter) ([]OutputLine, error)
}

// OutputChunk is how both stores keep consecutive lines of one step
// attempt: what they share once, then per line its time (microseconds
// after Base: stored times keep microseconds), its stream (one byte of
// Streams) and its text. A line costs a dozen bytes besides its text,
// where a JSON object per line costs a hundred (and a row per line in
// PostgreSQL some forty more).
type OutputChunk struct {
	Step    string   `json:"s"`
	Attempt int      `json:"a,omitempty"`
	Base    int64    `json:"t"` // Unix nanoseconds of the first line
	Offsets []int64  `json:"d"` // microseconds after Base
	Streams string   `json:"k"` // one byte per line: see streamCodes
	Texts   []string `json:"x"`
	// Other holds the names of streams without a code, by line index.
	Other map[int]string `json:"o,omitempty"`
}

var streamCodes = map[string]byte{StreamStdout: 'o', StreamStderr: 'e', StreamCall: 'c', StreamNote: 'n'}

// PrintedOutput returns the Printed lines of recs, in their order (nil
// when none printed).
func PrintedOutput(recs []*StepRecord) []OutputLine {
	var out []OutputLine
	for _, rec := range recs {
		out = append(out, rec.Printed...)
	}
	return out
}

// EncodedChunk is a chunk of output as a store keeps it: its first and
// last lines' numbers, counted from the first line of the write, its step
// and the chunk (OutputChunk) as JSON.
type EncodedChunk struct {
	First, Last uint64
	Step        string
	Data        []byte
}

// EncodeOutput numbers lines from 1 (Seq), sets a zero Time to now, and
// encodes them as chunks (OutputChunks; none: nil). A store appends them
// after the run's last line by adding that line's number to each chunk's.
func EncodeOutput(lines []OutputLine, now time.Time) ([]EncodedChunk, error) {
	for i := range lines {
		lines[i].Seq = uint64(i) + 1
		if lines[i].Time.IsZero() {
			lines[i].Time = now
		}
	}
	chunks, firsts := OutputChunks(lines)
	out := make([]EncodedChunk, len(chunks))
	for i, c := range chunks {
		data, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode output: %w", err)
		}
		out[i] = EncodedChunk{First: firsts[i], Last: firsts[i] + uint64(len(c.Texts)) - 1, Step: c.Step, Data: data}
	}
	return out, nil
}

// OutputChunks cuts lines (their Seq set, consecutive) into chunks of one
// step attempt each and returns them with the Seq of each one's first
// line.
func OutputChunks(lines []OutputLine) (chunks []OutputChunk, firsts []uint64) {
	for rest := lines; len(rest) > 0; {
		n := 1
		for n < len(rest) && rest[n].Step == rest[0].Step && rest[n].Attempt == rest[0].Attempt {
			n++
		}
		chunks, firsts = append(chunks, newOutputChunk(rest[:n])), append(firsts, rest[0].Seq)
		rest = rest[n:]
	}
	return chunks, firsts
}

func newOutputChunk(lines []OutputLine) OutputChunk {
	c := OutputChunk{Step: lines[0].Step, Attempt: lines[0].Attempt, Base: lines[0].Time.UnixNano(),
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

// Lines expands the chunk whose first line is number first.
func (c OutputChunk) Lines(first uint64) ([]OutputLine, error) {
	if len(c.Offsets) != len(c.Texts) || len(c.Streams) != len(c.Texts) {
		return nil, fmt.Errorf("%w: output chunk %d: %d times, %d streams, %d texts", ErrCorrupt, first, len(c.Offsets), len(c.Streams), len(c.Texts))
	}
	out := make([]OutputLine, len(c.Texts))
	for i := range out {
		stream := c.Other[i]
		for name, code := range streamCodes {
			if c.Streams[i] == code {
				stream = name
			}
		}
		out[i] = OutputLine{Seq: first + uint64(i), Time: time.Unix(0, c.Base+c.Offsets[i]*1e3).UTC(), Step: c.Step,
			Attempt: c.Attempt, Stream: stream, Text: c.Texts[i]}
	}
	return out, nil
}
