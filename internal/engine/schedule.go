package engine

import (
	"context"

	"github.com/runbook/runbook/internal/playbook"
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
	limit := rs.e.o.MaxParallel
	if rs.pb.MaxParallel > 0 {
		limit = rs.pb.MaxParallel
	}
	index := make(map[string]int, n)
	for i, s := range list {
		index[s.ID] = i
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
			i := next[0]
			started[i] = true
			res = result{i, rs.runStep(ctx, list[i], ph)}
		default:
			for _, i := range next {
				started[i] = true
				running++
				go func(i int) {
					finished <- result{i, rs.runStep(ctx, list[i], ph)}
				}(i)
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
