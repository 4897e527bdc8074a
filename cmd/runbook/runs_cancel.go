package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

func cmdRunsCancel(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs cancel", usage: "RUN_ID",
		summary: "Cancel an unfinished run (and its sub-playbook runs). It can still be resumed with 'runbook run --resume RUN_ID'.",
	})
	o := newRunsOpener(a, fs)
	var sims simFlags
	sims.add(fs)
	var cfgPath string
	runConfigFlag(fs, &cfgPath)
	pos, err := parsePositional(fs, args, 1, 1, "the RUN_ID (runbook runs list shows them)")
	if err != nil {
		return err
	}
	b, id, err := o.openForRun(ctx, pos[0])
	if err != nil {
		return err
	}
	defer b.close()
	r, err := b.get(ctx, id)
	if err != nil {
		return err
	}
	if r.Status.Done() {
		return &exitError{code: 1, err: &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s already %s", r.ID, r.Status)}, hint: "runbook runs show " + r.ID}
	}
	if api, ok := b.(*apiBackend); ok {
		if err := api.cancel(ctx, r.ID); err != nil {
			return withHint(err, "runbook runs show "+r.ID)
		}
		// The server stops the run's steps; wait for the run to end so the
		// next command sees it cancelled.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			cur, err := api.get(ctx, r.ID)
			if err != nil {
				return err
			}
			if cur.Status.Done() {
				fmt.Fprintf(a.stdout, "run %s %s\n", r.ID, cur.Status)
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		fmt.Fprintf(a.stdout, "run %s is cancelling; runbook runs show %s tells when it ended\n", r.ID, r.ID)
		return nil
	}
	store := b.(*storeBackend).store
	done, err := a.cancelHeldByNone(ctx, store, cfgPath, o, &sims, r)
	if done || err != nil {
		return err
	}
	// Another process executes the run (a replica, a runbook run): the
	// cancellation is recorded, and it stops the run there.
	cancelled, err := cancelRun(ctx, store, r)
	var ended *state.EndedMeanwhileError
	if errors.As(err, &ended) && ended.Run == r.ID {
		// It ended on another process (a replica) since it was read.
		return &exitError{code: 1, err: &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s already %s", r.ID, ended.Status)}, hint: "runbook runs show " + r.ID}
	}
	if err != nil {
		return withHint(err, "")
	}
	locks, err := store.Locks(ctx)
	if err == nil {
		for _, l := range locks {
			if cancelled[l.Owner] {
				_ = store.ReleaseLock(ctx, l.Key, l.Owner)
			}
		}
	}
	fmt.Fprintf(a.stdout, "run %s cancelled\n", r.ID)
	return nil
}

// cancelHeldByNone cancels run r, which no process holds, through a run
// host of this process: its top-level run is claimed and executed
// cancelled, so its finally steps run and its concurrency key is
// released, as when its holder cancels it. It reports false when another
// process holds the run (the caller records the cancellation for it).
func (a *app) cancelHeldByNone(ctx context.Context, store state.Store, cfgPath string, o *runsOpener, sims *simFlags, r *state.Run) (bool, error) {
	root := rootRun(ctx, store.GetRun, r)
	host, closeHost, err := a.hostHere(ctx, store, root.ID, cfgPath, o, sims, engine.Observer{})
	if err != nil {
		return true, err
	}
	defer closeHost()
	by := "run cancelled by " + currentUser()
	top, err := host.CancelHeldByNone(ctx, r.ID, errors.New(by))
	if _, elsewhere := wentOnElsewhere(ctx, store, root.ID, host, err); elsewhere || errors.Is(err, state.ErrFenced) {
		return false, nil
	}
	if err != nil {
		return true, withHint(err, "runbook runs show "+r.ID)
	}
	res, err := follow(ctx, host, top, true)
	if res == nil {
		return true, withHint(err, "runbook runs show "+r.ID)
	}
	cur, gerr := store.GetRun(ctx, r.ID)
	if gerr != nil {
		return true, gerr
	}
	fmt.Fprintf(a.stdout, "run %s %s\n", r.ID, cur.Status)
	return true, nil
}

// cancelRun marks r and its unfinished sub-playbook runs cancelled and
// returns their IDs.
func cancelRun(ctx context.Context, store state.Store, r *state.Run) (map[string]bool, error) {
	done := map[string]bool{}
	queue := []*state.Run{r}
	user := os.Getenv("USER")
	msg := "run cancelled"
	if user != "" {
		msg += " by " + user
	}
	for len(queue) > 0 && len(done) < 1000 {
		cur := queue[0]
		queue = queue[1:]
		if done[cur.ID] || cur.Status.Done() {
			continue
		}
		now := time.Now()
		cur.Status, cur.EndedAt, cur.Owner = state.RunCancelled, now, ""
		cur.Error = &state.ErrorRecord{Code: string(fault.Cancelled), Message: msg}
		err := store.SaveRun(ctx, cur, state.Event{Time: now, Type: "run.cancelled", Message: msg})
		if errors.Is(err, state.ErrEndedMeanwhile) && cur.ID != r.ID {
			continue // a sub-playbook run that ended meanwhile keeps its end
		}
		if err != nil {
			return done, fmt.Errorf("cancel run %s: %w", cur.ID, err)
		}
		done[cur.ID] = true
		children, err := store.ListRuns(ctx, state.RunFilter{ParentID: cur.ID})
		if err != nil {
			return done, err
		}
		sort.Slice(children, func(i, j int) bool { return children[i].ID < children[j].ID })
		queue = append(queue, children...)
	}
	return done, nil
}
