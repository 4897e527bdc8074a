package easymaker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// snapshot is one read of a resource being waited on.
type snapshot struct {
	Status string
	Reason string
	// Outputs are the step's outputs as of this read.
	Outputs steps.Outputs
}

// reader reads a resource by ID.
type reader func(ctx context.Context, cl *easymaker.Client, id string) (snapshot, error)

// waitTimeout is the wait's length: the step's timeout, cut to the
// resource's own timeout_hours (plus a grace period for the service to
// record the end) when it has one.
func waitTimeout(w waitParams, timeoutHours int) time.Duration {
	d := w.Timeout.Std()
	if d <= 0 {
		d = 24 * time.Hour
	}
	if timeoutHours > 0 {
		if own := time.Duration(timeoutHours)*time.Hour + 10*time.Minute; own < d {
			d = own
		}
	}
	return d
}

// waitFor re-reads the resource id (what names it in messages: "training")
// until its status is done: COMPLETE, ACTIVE or ENABLED returns the last
// read; a status containing FAIL or STOP fails at once with code failed,
// the status and the resource's reason; the deadline fails with timeout.
// The first read is immediate, the next ones every interval.
func waitFor(ctx context.Context, c *steps.Call, cl *easymaker.Client, what, id string, read reader, interval time.Duration, deadline time.Time) (snapshot, error) {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	last := ""
	for {
		s, err := read(ctx, cl, id)
		if err != nil {
			if ctx.Err() != nil {
				return snapshot{}, fmt.Errorf("wait for %s %s: %w", what, id, ctx.Err())
			}
			return snapshot{}, fmt.Errorf("wait for %s %s: %w", what, id, err)
		}
		if s.Status != last {
			c.Log.Info("waiting", "resource", what, "id", id, "status", s.Status)
			last = s.Status
		}
		done, failed := easymaker.StatusDone(s.Status)
		if failed {
			reason := s.Reason
			if reason == "" {
				reason = "no reason given"
			}
			return s, &fault.Error{Code: fault.Failed,
				Message: fmt.Sprintf("%s %s ended %s: %s", what, id, s.Status, reason),
				Data:    map[string]any{"id": id, "status": s.Status, "reason": s.Reason}}
		}
		if done {
			return s, nil
		}
		if !deadline.IsZero() && !c.Now().Before(deadline) {
			return s, &fault.Error{Code: fault.Timeout,
				Message: fmt.Sprintf("%s %s is still %s at the wait's deadline %s", what, id, s.Status, deadline.UTC().Format(time.RFC3339)),
				Data:    map[string]any{"id": id, "status": s.Status}}
		}
		sleep := interval
		if !deadline.IsZero() {
			if left := deadline.Sub(c.Now()); left < sleep {
				sleep = max(left, time.Millisecond)
			}
		}
		// A host that parks runs (runbook serve) parks the run until the
		// next read: the step runs again then, from its checkpoint (the ID
		// and the deadline), and reads first.
		if err := steps.WaitUntil(ctx, c, c.Now().Add(sleep), "next read of "+what+" "+id); err != nil {
			if errors.Is(err, fault.ErrSuspended) {
				return s, err
			}
			return s, fmt.Errorf("wait for %s %s (last status %s): %w", what, id, s.Status, err)
		}
	}
}
