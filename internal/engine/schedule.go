package engine

import (
	"context"
	"fmt"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// runList runs one list of steps (main, on_failure or finally) to the end:
// a step starts when its dependencies are done — every earlier step when it
// has no `needs`, the named ones otherwise — and at most MaxParallel steps
// (the playbook's max_parallel, else the engine's) run at once.
//
// A step that is not settled — parked on an approval, or not started
// because the run was cancelled — never releases its dependents: they wait
// for a resume.
func (rs *runState) runList(ctx context.Context, list []*playbook.Step, ph phase) {
	n := len(list)
	if n == 0 {
		return
	}
	limit := rs.e.o.Limits.MaxParallel
	if rs.pb.MaxParallel > 0 {
		limit = rs.pb.MaxParallel
	}
	index := make(map[string]int, n)
	needs := false // a step names its needs: it may be ready before those above it
	for i, s := range list {
		index[s.ID] = i
		needs = needs || s.Needs != nil
	}
	started := make([]bool, n)
	done := make([]bool, n)
	firstNotDone := 0 // every step before it is done
	type result struct {
		i       int
		settled bool
	}
	finished := make(chan result, n)
	running := 0

	ready := func(i int) bool {
		s := list[i]
		if s.Needs == nil {
			return firstNotDone >= i
		}
		for _, need := range s.Needs {
			j, ok := index[need]
			if ok && !done[j] {
				return false
			}
		}
		return true
	}
	var next []int
	for {
		next = next[:0]
		for i := firstNotDone; i < n && running+len(next) < limit; i++ {
			if !needs && i > firstNotDone {
				break // without needs, none below the first not done is ready
			}
			if !started[i] && ready(i) {
				next = append(next, i)
			}
		}
		var res result
		switch {
		case running == 0 && len(next) == 0:
			return
		case running == 0 && len(next) == 1:
			// The only step that can run: run it on this goroutine, so a
			// sequential run (and a waiting one) costs no extra goroutine.
			// Its end is held for what follows (stepRun.chained).
			i := next[0]
			started[i] = true
			res = result{i, rs.runStep(ctx, list[i], ph, true)}
		default:
			for _, i := range next {
				started[i] = true
				running++
				go func(i int) {
					finished <- result{i, rs.runStep(ctx, list[i], ph, false)}
				}(i)
			}
			if rs.holding() {
				rs.flushLazy(ctx) // a held end is not left while steps run
			}
			res = <-finished
			running--
		}
		if !res.settled {
			continue
		}
		done[res.i] = true
		for firstNotDone < n && done[firstNotDone] {
			firstNotDone++
		}
	}
}

// phase is the list a step belongs to; it decides the implicit condition of
// a step without `if`: main steps run while nothing failed (success()),
// on_failure and finally steps run regardless (always()).
type phase int

const (
	phaseMain phase = iota
	phaseOnFailure
	phaseFinally
)

// runStep runs one step of a list to a final status and publishes it to
// the scope of later steps; chained: it runs alone, its end held for what
// follows (stepRun.chained). It reports whether the step is settled (its
// dependents may start): waiting steps and steps left for a resume are not.
func (rs *runState) runStep(ctx context.Context, st *playbook.Step, ph phase, chained bool) bool {
	rs.mu.RLock()
	rec := rs.records[st.ID]
	rs.mu.RUnlock()
	if finished(rec) {
		return true // finished in an earlier process
	}
	sr := rs.newStep(st, st.ID, nil, ph, chained)
	if skip, why := rs.blockedByNeeds(st); skip {
		sr.skip(ctx, why)
		return true
	}
	var status state.StepStatus
	if st.ForEach != nil {
		status = sr.forEach(ctx)
	} else {
		status = sr.run(ctx)
	}
	if status == state.StepFailed && !st.ContinueOnError {
		rs.mu.Lock()
		rs.failed = true
		rs.mu.Unlock()
	}
	return status.Done() && status != state.StepCancelled
}

// blockedByNeeds reports whether a step with explicit needs must be skipped
// because one of them did not succeed (unless its `if` uses a status
// function, which then decides).
func (rs *runState) blockedByNeeds(st *playbook.Step) (bool, string) {
	if st.Needs == nil || (st.If != nil && st.If.UsesStatusFunc()) {
		return false, ""
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	for _, need := range st.Needs {
		ss := rs.scopeStep[need]
		if ss == nil {
			continue
		}
		switch ss.Status {
		case string(state.StepSucceeded):
		case string(state.StepFailed):
			if rs.continues(need) {
				continue
			}
			return true, fmt.Sprintf("needed step %s failed", need)
		default:
			return true, fmt.Sprintf("needed step %s was %s", need, ss.Status)
		}
	}
	return false, ""
}

func (rs *runState) continues(id string) bool {
	for _, s := range rs.allSteps() {
		if s.ID == id {
			return s.ContinueOnError
		}
	}
	return false
}
