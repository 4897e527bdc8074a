package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Defaults of the step output (Options.Limits.MaxStepOutput, the batching).
const (
	// DefaultMaxStepOutput is how many bytes of output one attempt of a
	// step keeps in the run's output area; the rest is counted and
	// dropped, and a note line says how much.
	DefaultMaxStepOutput = 8 << 20
	// outputFlushBytes and outputFlushEvery bound a batch: lines are
	// written when this many bytes are waiting, or this long after the
	// first of them (Limits.OutputFlushEvery), and when the attempt ends. A chatty step costs one
	// store write per batch, not per line.
	outputFlushBytes = 64 << 10
	outputFlushEvery = 200 * time.Millisecond
)

// outputQueue is how many full batches may wait for the store: the
// step's writer goes on while they are written, and waits beyond that, so
// a step printing faster than the store writes is slowed, not buffered
// without bound.
const outputQueue = 4

// stepOutput is the steps.OutputSink of one attempt: it redacts each line,
// keeps at most max bytes of them, and hands them in batches to a writer
// goroutine (started by the first batch) that writes them to the store's
// output area and to Options.Observer.Output, in order. The lines waiting
// when the attempt ends go with the step's record instead (close).
type stepOutput struct {
	e       *Engine
	store   state.StepOutput
	runID   string
	step    string
	attempt int
	max     int64
	every   time.Duration // Limits.OutputFlushEvery

	mu      sync.Mutex
	buf     []state.OutputLine
	bufSize int
	kept    int64
	dropped int64 // bytes beyond max
	lost    int64 // lines beyond max
	timer   *time.Timer
	closed  bool

	// smu orders the hand-overs: a batch is taken and queued under it, so
	// batches reach the writer in the order of their lines.
	smu     sync.Mutex
	batches chan []state.OutputLine // nil until the first batch
	done    chan struct{}           // closed when the writer has written everything
	// unstored counts the lines the store refused (the writer's; read by
	// close once it is done): the first refusal is logged, the count at
	// close.
	unstored int
}

// initOutput makes o the output of attempt.
func (sr *stepRun) initOutput(o *stepOutput, attempt int) {
	o.e, o.store, o.runID, o.step, o.attempt, o.max = sr.rs.e, sr.rs.e.o.Store, sr.rs.run.ID, sr.rec.ID, attempt, sr.rs.e.o.Limits.MaxStepOutput
	o.every = sr.rs.e.o.Limits.OutputFlushEvery
}

// Line takes one line of the step's output.
func (o *stepOutput) Line(stream, text string) {
	size := int64(len(text) + 1)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	if o.kept+size > o.max {
		o.dropped += size
		o.lost++
		o.mu.Unlock()
		return
	}
	o.kept += size
	text = o.e.o.Redactor.String(text)
	o.buf = append(o.buf, state.OutputLine{Time: o.e.o.Clock.Now(), Step: o.step, Attempt: o.attempt, Stream: stream, Text: text})
	o.bufSize += len(text) + 1
	full := o.bufSize >= outputFlushBytes
	if !full && o.timer == nil {
		o.timer = time.AfterFunc(o.every, o.flush)
	}
	o.mu.Unlock()
	if full {
		o.flush()
	}
}

// takeLocked returns the waiting lines and starts a new batch, sized as
// the last one; a closed output starts none.
func (o *stepOutput) takeLocked() []state.OutputLine {
	lines := o.buf
	o.buf, o.bufSize = nil, 0
	if !o.closed {
		o.buf = make([]state.OutputLine, 0, max(len(lines), 16))
	}
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
	return lines
}

// flush queues the waiting lines for the writer (the batch is full, or
// its time is up).
func (o *stepOutput) flush() {
	o.smu.Lock()
	defer o.smu.Unlock()
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	lines := o.takeLocked()
	o.mu.Unlock()
	o.queue(lines)
}

// queue hands lines to the writer, starting it at the first batch. The
// caller holds smu.
func (o *stepOutput) queue(lines []state.OutputLine) {
	if len(lines) == 0 {
		return
	}
	if o.batches == nil {
		o.batches, o.done = make(chan []state.OutputLine, outputQueue), make(chan struct{})
		go func() {
			defer close(o.done)
			for b := range o.batches {
				o.write(b)
			}
		}()
	}
	o.batches <- lines
}

// write stores lines (the store sets their Seq) and shows them. A failed
// write is logged, once per attempt (close says how many lines were
// lost): the step goes on, its output is lost.
func (o *stepOutput) write(lines []state.OutputLine) {
	ctx, cancel := context.WithTimeout(context.Background(), o.e.o.Limits.StateWrites)
	err := o.store.AppendOutput(ctx, o.runID, lines)
	cancel()
	if err != nil && o.unstored == 0 {
		o.e.o.Logger.Warn("step output not stored", "run_id", o.runID, "step", o.step, "attempt", o.attempt, "err", err)
	}
	if err != nil {
		o.unstored += len(lines)
	}
	if o.e.o.Observer.Output != nil {
		o.e.o.Observer.Output(o.runID, lines)
	}
}

// close ends the attempt's output: once the writer has stored the
// batches already queued, it returns the lines still waiting, with a note
// saying how much was dropped when lines were, for the write of the
// step's record that follows (StepRecord.Printed, stepRun.endOutput): an
// attempt's last lines cost no commit of their own, and are on record
// with its end. They are shown now. Lines printed after close are dropped
// silently (a background child of a shell step).
func (o *stepOutput) close() []state.OutputLine {
	o.smu.Lock()
	o.mu.Lock()
	o.closed = true
	lines := o.takeLocked()
	if o.dropped > 0 {
		lines = append(lines, state.OutputLine{Time: o.e.o.Clock.Now(), Step: o.step, Attempt: o.attempt, Stream: state.StreamNote,
			Text: fmt.Sprintf("… output truncated: %d more bytes (%d lines) not kept; a step keeps %d bytes of output per attempt", o.dropped, o.lost, o.max)})
	}
	o.mu.Unlock()
	if o.batches != nil {
		close(o.batches)
	}
	o.smu.Unlock()
	if o.done != nil {
		<-o.done
	}
	if o.unstored > 0 {
		o.e.o.Logger.Warn("step output lines not stored", "run_id", o.runID, "step", o.step, "attempt", o.attempt, "lines", o.unstored)
	}
	if len(lines) > 0 && o.e.o.Observer.Output != nil {
		o.e.o.Observer.Output(o.runID, lines)
	}
	return lines
}
