package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runbook/runbook/internal/state"
)

// Fencing (state.Fence). A write that ctx fences starts with a call of
// runbook_fence (a function of the schema), which locks the fence's top-level run
// and fails the transaction when its owner is no longer the fence's: the
// statements after it are not run, so a refused write writes nothing.

// fencedCode is the SQLSTATE runbook_fence raises.
const fencedCode = "RB001"

// newBatch returns a batch for a write of run runID, starting with the
// check of ctx's fence when it has one.
func newBatch(ctx context.Context, runID string) *pgx.Batch {
	b := &pgx.Batch{}
	queueFence(ctx, b, runID)
	return b
}

// fenceCall checks that run $1's top-level run $2 is owned by $3, and
// locks it (runbook_fence).
const fenceCall = `SELECT runbook_fence($1, $2, $3)`

// queueFence queues the check of ctx's fence (none: nothing) for a write
// of run runID.
func queueFence(ctx context.Context, b *pgx.Batch, runID string) {
	if f, ok := state.FenceOf(ctx); ok {
		b.Queue(fenceCall, runID, f.Run, f.Owner)
	}
}

// fenceError turns a write refused by ctx's fence into a
// *state.FencedError naming the run's owner now; other errors are
// returned as they are.
func fenceError(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || pe.Code != fencedCode {
		return err
	}
	f, _ := state.FenceOf(ctx)
	return &state.FencedError{Run: f.Run, Owner: pe.Detail}
}
