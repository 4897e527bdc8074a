package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// item is one for_each element.
type item struct {
	value any
	index int
}

// maxItems bounds the elements of one for_each.
const maxItems = 10000

// forEach runs a for_each step: each item through a stepRun of its own
// (record "<step>[i]"), up to the step's max_parallel at a time and none
// after one fails or is cancelled, then settles the step's record from
// theirs. Its outputs are the items' (items) and their number (count).
func (sr *stepRun) forEach(ctx context.Context) state.StepStatus {
	rs, rec := sr.rs, sr.rec
	if rec.StartedAt.IsZero() {
		rec.StartedAt = rs.e.o.Clock.Now()
	}
	rs.mu.RLock()
	v, err := rs.eval(sr.st.ForEach, rs.scope(nil))
	rs.mu.RUnlock()
	var items []any
	if err == nil {
		items, err = forEachItems(v)
	}
	if err != nil {
		return sr.finish(ctx, nil, &fault.Error{Code: fault.Invalid, Message: "for_each: " + err.Error()})
	}
	results := sr.runItems(ctx, items)
	outs := make([]any, len(results))
	for i, r := range results {
		outs[i] = map[string]any{}
		if r.rec != nil && r.rec.Outputs != nil {
			outs[i] = r.rec.Outputs
		}
	}
	out := map[string]any{"items": outs, "count": len(items)}
	status, firstErr := itemsStatus(results)
	if len(items) == 0 {
		status = state.StepSucceeded
	}
	switch status {
	case state.StepFailed:
		return sr.finish(ctx, out, &fault.Error{Code: fault.Code(firstErr.Code), Message: firstErr.Message})
	case state.StepCancelled:
		return sr.finish(ctx, out, context.Canceled)
	case state.StepWaiting:
		rs.setWaiting()
		return state.StepWaiting
	case state.StepSkipped:
		return sr.skip(ctx, "every item was skipped")
	}
	return sr.finish(ctx, out, nil)
}

// itemResult is how one for_each item ended; the zero value is an item
// never started.
type itemResult struct {
	status state.StepStatus
	rec    *state.StepRecord
}

// runItems runs the items of the step, at most max_parallel at once (one
// by default), and starts none after an item failed or was cancelled.
func (sr *stepRun) runItems(ctx context.Context, items []any) []itemResult {
	st := sr.st
	results := make([]itemResult, len(items))
	var mu sync.Mutex
	stop := false
	sem := make(chan struct{}, max(st.MaxParallel, 1))
	var wg sync.WaitGroup
	for i, v := range items {
		sem <- struct{}{}
		mu.Lock()
		halt := stop
		mu.Unlock()
		if halt {
			<-sem
			break
		}
		wg.Add(1)
		go func(i int, v any) {
			defer wg.Done()
			defer func() { <-sem }()
			it := sr.rs.newStep(st, itemID(st.ID, i), &item{value: v, index: i}, sr.ph, cap(sem) == 1)
			status := it.run(ctx)
			mu.Lock()
			results[i] = itemResult{status: status, rec: it.rec}
			if status == state.StepFailed || status == state.StepCancelled {
				stop = true
			}
			mu.Unlock()
		}(i, v)
	}
	wg.Wait()
	return results
}

// itemOrder ranks the statuses of items by how much they decide the
// step's: it takes the highest of its items' (an item left pending for a
// resume counts as cancelled). A step is skipped only when every item was.
var itemOrder = []state.StepStatus{state.StepSkipped, state.StepSucceeded, state.StepWaiting, state.StepFailed, state.StepCancelled}

// itemsStatus returns a for_each step's status from its items' and, when
// it failed, the error of the first item that failed.
func itemsStatus(results []itemResult) (state.StepStatus, *state.ErrorRecord) {
	rank := 0
	var firstErr *state.ErrorRecord
	for _, r := range results {
		s := r.status
		if s == stepPending {
			s = state.StepCancelled
		}
		rank = max(rank, slices.Index(itemOrder, s))
		if s == state.StepFailed && firstErr == nil {
			firstErr = r.rec.Error
		}
	}
	return itemOrder[rank], firstErr
}

func forEachItems(v any) ([]any, error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case []string:
		for _, s := range x {
			items = append(items, s)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			items = append(items, map[string]any{"key": k, "value": x[k]})
		}
	case nil:
	default:
		return nil, fmt.Errorf("must be a list or a map (got %T)", v)
	}
	if len(items) > maxItems {
		return nil, fmt.Errorf("has %d items; at most %d are allowed", len(items), maxItems)
	}
	return items, nil
}
