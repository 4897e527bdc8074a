package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/retry"
	"github.com/runbook/runbook/internal/state"
)

// Store faults. Every read and write of a run's state on the run's path
// (its records loaded, its key taken and released, an approval read, a
// step's completion, the run's start, park and end) goes through
// retryStore. An error wrapping state.ErrUnavailable (the store could not
// be reached, or it cut the connection) is not the run's: the operation is
// made again, with backoff and jitter, until it is made. Meanwhile the run
// neither fails nor moves on: a step whose completion is being written
// is not followed by anything, the run keeps its concurrency key and its
// owner. Two things end the wait: the host stopping (the context Execute
// or Resume was given: the run stays as last recorded, and is resumed
// from there), and a write of the run refused by its fence (another
// process owns the run now: it goes on there). An error no retry cures (a disk full, a
// file too large, an I/O error) is returned at once, and a write that
// cannot be made so stops the run as failed (notWritten).

// The backoff between two tries of a store operation (retry.Backoff):
// doubled from storeRetryFirst up to storeRetryMax, each wait drawn in its
// upper half.
const (
	storeRetryFirst = 50 * time.Millisecond
	storeRetryMax   = 2 * time.Second
)

// retryStore runs op, a read or write of run runID's state, until it
// succeeds or fails with an error the caller's policy, again, does not
// try again (a fenced write never is); each try is logged with the run and
// the error. It tries while host lives and fenced (nil: never) is open,
// and returns op's last error.
func (e *Engine) retryStore(host context.Context, fenced <-chan struct{}, runID string, again func(error) bool, op func() error) error {
	for try := 1; ; try++ {
		err := op()
		if err == nil || !again(err) || errors.Is(err, state.ErrFenced) || host.Err() != nil {
			if err == nil && try > 1 {
				e.o.Logger.Info("state store answers again", "run_id", runID, "tries", try)
			}
			return err
		}
		d := retry.Backoff(try, storeRetryFirst, storeRetryMax)
		e.o.Logger.Warn("state store operation failed; trying again", "run_id", runID, "try", try, "in", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-host.Done():
			t.Stop()
			return err
		case <-fenced:
			t.Stop()
			return err
		}
	}
}

// stored is retryStore for an operation of rs's run: an unavailable
// store is tried again while the run's host lives and no write of the
// run was refused. A lapse of this process's lease (Fence) stops the run
// from starting anything, but not a write in progress: the write is
// fenced, so the store makes it only while this process still owns the
// run, and a step that finished is then recorded, not executed again by
// whoever goes on with the run.
func (rs *runState) stored(op func() error) error {
	return rs.e.retryStore(rs.host, rs.fence.refusedWrite(), rs.run.ID, unavailable, op)
}

// unavailable is the policy of stored: only what a retry cures.
func unavailable(err error) bool { return errors.Is(err, state.ErrUnavailable) }

// hostKey carries, in a run's context, the context of its host (what
// Execute or Resume was given): a sub-playbook run's host is its
// top-level run's.
type hostKey struct{}

// hostOf returns the host's context of a run executed with ctx.
func hostOf(ctx context.Context) context.Context {
	if h, ok := ctx.Value(hostKey{}).(context.Context); ok {
		return h
	}
	return ctx
}

// ErrNotWritten is what a run stopped by a write of its state that could
// not be made fails with (errors.Is): the store refused it with an error
// no retry cures, such as a disk full. Nothing more of the run runs
// (on_failure and finally do not: their records could not be written
// either). Execute and Resume return it; the run is recorded failed with
// it when that last write can be made, else it stays as last recorded.
var ErrNotWritten = &fault.Error{Code: fault.Internal, Message: "the run's state could not be written"}

// notWritten stops the run when err, the error of a write of its state,
// is one no retry cures, with ErrNotWritten and err as the cause (the run
// fails). A refusal of its fence, a cancellation recorded meanwhile, and
// any error once the host stopped (the run stays as last recorded, to be
// resumed) do not stop it here. It returns err.
func (rs *runState) notWritten(err error) error {
	if err == nil || errors.Is(err, state.ErrFenced) || rs.fenced() != nil || recordedCancel(err) != nil || rs.host.Err() != nil || rs.cancel == nil {
		return err
	}
	rs.e.o.Logger.Error("the run's state could not be written; stopping the run", "run_id", rs.run.ID, "err", err)
	rs.cancel(fmt.Errorf("%w: %w", ErrNotWritten, err))
	return err
}

// stoppedUnwritten reports whether cause is why a run stopped: a write
// that could not be made.
func stoppedUnwritten(cause error) bool { return errors.Is(cause, ErrNotWritten) }

// RetryStore runs op, a read or write of run runID's state made by the
// run's host (the read that wakes a parked run, the claim of a run about
// to execute), as the engine makes its own: an unavailable store is tried
// again, with the same backoff, while host lives. It returns op's last
// error.
func (e *Engine) RetryStore(host context.Context, runID string, op func() error) error {
	return e.retryStore(host, nil, runID, unavailable, op)
}
