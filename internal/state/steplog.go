package state

import (
	"context"
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
// Deleting a run deletes its output. Stores implement it beside Store;
// callers find it with a type assertion. How much is kept per step is the
// writer's decision (the engine caps it and appends a StreamNote line
// saying what it dropped). The contract suite is
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
