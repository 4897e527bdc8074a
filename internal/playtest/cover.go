package playtest

import (
	"fmt"
	"io"
	"strings"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// PlaybookCover is how much of one playbook its tests exercised: which
// steps ran, and which branches (an `if` true and false, a retry, a
// failure let through by continue_on_error, the on_failure list) were
// taken, over every run of every case.
type PlaybookCover struct {
	Playbook      string       `json:"playbook"`
	File          string       `json:"file"`
	Cases         int          `json:"cases"`
	StepsRan      int          `json:"steps_ran"`
	StepsTotal    int          `json:"steps_total"`
	BranchesTaken int          `json:"branches_taken"`
	BranchesTotal int          `json:"branches_total"`
	Steps         []*StepCover `json:"steps"`
}

// StepCover is one step's coverage.
type StepCover struct {
	ID       string         `json:"id"`
	List     string         `json:"list"` // steps, on_failure or finally
	Ran      int            `json:"ran"`  // cases in which it ran
	Branches []*BranchCover `json:"branches,omitempty"`
}

// BranchCover is one branch and the number of cases that took it.
type BranchCover struct {
	Name  string `json:"name"` // if true, if false (not for `if: always()`), retried, failed and continued, on_failure ran
	Taken int    `json:"taken"`
}

// Coverage computes the coverage of each tested playbook from results,
// in the order the playbooks first appear.
func Coverage(results []*Result) []*PlaybookCover {
	var out []*PlaybookCover
	byPath := map[string]*coverAcc{}
	for _, r := range results {
		if r.Playbook == nil {
			continue
		}
		acc, ok := byPath[r.Playbook.Path]
		if !ok {
			acc = newCoverAcc(r.Playbook)
			byPath[r.Playbook.Path] = acc
			out = append(out, acc.pc)
		}
		acc.add(r)
	}
	for _, pc := range out {
		for _, s := range pc.Steps {
			if s.Ran > 0 {
				pc.StepsRan++
			}
			for _, b := range s.Branches {
				pc.BranchesTotal++
				if b.Taken > 0 {
					pc.BranchesTaken++
				}
			}
		}
	}
	return out
}

type coverAcc struct {
	pc    *PlaybookCover
	steps map[string]*StepCover
	defs  map[string]*playbook.Step
}

func newCoverAcc(pb *playbook.Playbook) *coverAcc {
	acc := &coverAcc{pc: &PlaybookCover{Playbook: pb.Name, File: pb.Path}, steps: map[string]*StepCover{}, defs: map[string]*playbook.Step{}}
	for _, l := range []struct {
		name  string
		steps []*playbook.Step
	}{{"steps", pb.Steps}, {"on_failure", pb.OnFailure}, {"finally", pb.Finally}} {
		for i, s := range l.steps {
			sc := &StepCover{ID: s.ID, List: l.name}
			switch {
			case s.If != nil && alwaysTrue(s.If):
				sc.Branches = append(sc.Branches, &BranchCover{Name: "if true"})
			case s.If != nil:
				sc.Branches = append(sc.Branches, &BranchCover{Name: "if true"}, &BranchCover{Name: "if false"})
			}
			if s.Retry != nil && s.Retry.Attempts > 1 {
				sc.Branches = append(sc.Branches, &BranchCover{Name: "retried"})
			}
			if s.ContinueOnError {
				sc.Branches = append(sc.Branches, &BranchCover{Name: "failed and continued"})
			}
			if l.name == "on_failure" && i == 0 {
				sc.Branches = append(sc.Branches, &BranchCover{Name: "on_failure ran"})
			}
			acc.steps[s.ID] = sc
			acc.defs[s.ID] = s
			acc.pc.Steps = append(acc.pc.Steps, sc)
			acc.pc.StepsTotal++
		}
	}
	return acc
}

// add counts what one case exercised: a step ran or a branch was taken
// when it did in any run of the case.
func (acc *coverAcc) add(r *Result) {
	acc.pc.Cases++
	ran := map[string]bool{}
	taken := map[*BranchCover]bool{}
	for _, t := range r.Runs {
		scope := traceScope(&t, r.Env)
		for _, rec := range t.Steps {
			sc, ok := acc.steps[rec.ID]
			if !ok {
				// A for_each item (deploy[3]): its step ran when one of its
				// items did; an item retried, or failed and let through,
				// takes its step's branch.
				if i := strings.IndexByte(rec.ID, '['); i > 0 {
					if sc, ok := acc.steps[rec.ID[:i]]; ok {
						acc.record(sc, rec, ran, taken)
					}
				}
				continue
			}
			acc.record(sc, rec, ran, taken)
			if b := sc.branch("if false"); b != nil && rec.Status == state.StepSkipped && conditionFalse(acc.defs[rec.ID].If, scope) {
				taken[b] = true
			}
		}
	}
	for id := range ran {
		acc.steps[id].Ran++
	}
	for b := range taken {
		b.Taken++
	}
}

func (acc *coverAcc) record(sc *StepCover, rec *state.StepRecord, ran map[string]bool, taken map[*BranchCover]bool) {
	executed := rec.Attempts > 0 && rec.Status != state.StepSkipped
	if executed {
		ran[sc.ID] = true
	}
	for _, b := range sc.Branches {
		switch b.Name {
		case "if true":
			if executed {
				taken[b] = true
			}
		case "retried":
			if rec.Attempts > 1 {
				taken[b] = true
			}
		case "failed and continued":
			if rec.Status == state.StepFailed {
				taken[b] = true
			}
		case "on_failure ran":
			if executed {
				taken[b] = true
			}
		}
	}
}

// branch returns the step's branch of that name (nil: none).
func (s *StepCover) branch(name string) *BranchCover {
	for _, b := range s.Branches {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// alwaysTrue reports whether a condition reads nothing and holds whatever
// the run's state (`always()`): its false branch cannot be taken, so it is
// not counted.
func alwaysTrue(p *expr.Program) bool {
	if len(p.Refs()) > 0 {
		return false
	}
	for _, s := range []*expr.Scope{{}, {Failed: true}, {Failed: true, Cancelled: true}} {
		if ok, err := p.EvalBool(s); err != nil || !ok {
			return false
		}
	}
	return true
}

// conditionFalse reports whether a skipped step was skipped by its own
// condition: its `if` is false over what the run ended with. A step
// skipped because an earlier one failed (its `if` still true) did not
// take the false branch.
func conditionFalse(p *expr.Program, scope *expr.Scope) bool {
	if p == nil {
		return false
	}
	ok, err := p.EvalBool(scope)
	return err == nil && !ok
}

// traceScope is what a run's conditions read once it ended.
func traceScope(t *RunTrace, env map[string]string) *expr.Scope {
	s := &expr.Scope{Env: env, Steps: map[string]*expr.StepState{}, Failed: t.Status == string(state.RunFailed)}
	if t.Run != nil {
		s.Inputs, s.Trigger = t.Run.Inputs, t.Run.Trigger
		s.Run = expr.RunInfo{ID: t.Run.ID, Playbook: t.Run.Playbook, StartedAt: t.Run.StartedAt, Status: string(t.Run.Status)}
	}
	for _, rec := range t.Steps {
		st := &expr.StepState{Outputs: rec.Outputs, Status: string(rec.Status)}
		if rec.Error != nil {
			st.Error = &expr.ErrorInfo{Code: rec.Error.Code, Message: rec.Error.Message, Data: rec.Error.Data, Attempt: rec.Attempts}
		}
		s.Steps[rec.ID] = st
	}
	return s
}

// WriteCoverage prints the coverage of each playbook: a summary line, then
// a line per step with the branches it has, those never taken in
// capitals so they stand out.
func WriteCoverage(w io.Writer, cov []*PlaybookCover) {
	for _, pc := range cov {
		fmt.Fprintf(w, "coverage: %s (%s): steps %d/%d (%s), branches %d/%d (%s), %d cases\n",
			pc.Playbook, pc.File, pc.StepsRan, pc.StepsTotal, percent(pc.StepsRan, pc.StepsTotal),
			pc.BranchesTaken, pc.BranchesTotal, percent(pc.BranchesTaken, pc.BranchesTotal), pc.Cases)
		width := 0
		for _, s := range pc.Steps {
			width = max(width, len(label(s)))
		}
		for _, s := range pc.Steps {
			line := fmt.Sprintf("  %-*s  ran in %d of %d cases", width, label(s), s.Ran, pc.Cases)
			if s.Ran == 0 {
				line = fmt.Sprintf("  %-*s  NEVER RAN", width, label(s))
			}
			var bs []string
			for _, b := range s.Branches {
				if b.Taken > 0 {
					bs = append(bs, fmt.Sprintf("%s: %d", b.Name, b.Taken))
				} else {
					bs = append(bs, strings.ToUpper(b.Name)+": 0")
				}
			}
			if len(bs) > 0 {
				line += "; " + strings.Join(bs, ", ")
			}
			fmt.Fprintln(w, line)
		}
	}
}

func label(s *StepCover) string {
	if s.List == "steps" {
		return s.ID
	}
	return s.List + "." + s.ID
}

func percent(n, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", n*100/total)
}
