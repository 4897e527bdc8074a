package statetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// PutApproval records a as the answer to its step, whatever was recorded
// before: what a test writes to set up an approval.
func PutApproval(ctx context.Context, s state.Store, a state.Approval) error {
	return s.AnswerApproval(ctx, a.RunID, a.Step, func(*state.StepRecord, *state.Approval) (*state.Approval, []state.Event, error) {
		return &a, nil, nil
	})
}

// The refusals of tally.
var (
	errDecided = errors.New("the approval is decided already")
	errTwice   = errors.New("answered twice by one approver")
)

// tally is, in small, the decision the engine makes on an answer
// (internal/engine, Approve): an answer to a decided approval, or by
// someone who already answered, is refused; otherwise it is added, and a
// rejection, or the approval that makes required, decides the approval.
func tally(ans state.ApprovalAnswer, required int) state.Decide {
	return func(step *state.StepRecord, prev *state.Approval) (*state.Approval, []state.Event, error) {
		if step == nil || step.Status != state.StepWaiting {
			return nil, nil, errors.New("no step waiting")
		}
		var answers []state.ApprovalAnswer
		if prev != nil {
			if !prev.Pending {
				return nil, nil, errDecided
			}
			if slices.ContainsFunc(prev.Answers, func(an state.ApprovalAnswer) bool { return an.By == ans.By }) {
				return nil, nil, errTwice
			}
			answers = slices.Clone(prev.Answers)
		}
		answers = append(answers, ans)
		approvals := 0
		for _, an := range answers {
			if an.Approved {
				approvals++
			}
		}
		next := &state.Approval{RunID: step.RunID, Step: step.ID, Approved: ans.Approved, By: ans.By, At: ans.At,
			Answers: answers, Pending: ans.Approved && approvals < required}
		ev := state.Event{Type: "approval.answered", Step: step.ID, Time: ans.At,
			Data: map[string]any{"by": ans.By, "approved": ans.Approved}}
		return next, []state.Event{ev}, nil
	}
}

func testAnswers(t *testing.T, open opener) {
	t.Run("an answer is decided on the step and the answers before it, and written with its events", func(t *testing.T) {
		s, _ := open(t)
		waitingStep(t, s, "r1", 2)
		ok(t, s.AnswerApproval(ctx, "r1", "gate", tally(state.ApprovalAnswer{By: "ann", Approved: true, At: at(time.Second)}, 2)))
		got, err := s.GetApproval(ctx, "r1", "gate")
		ok(t, err)
		same(t, got.Pending, true)
		ok(t, s.AnswerApproval(ctx, "r1", "gate", tally(state.ApprovalAnswer{By: "bob", Approved: true, At: at(2 * time.Second)}, 2)))
		got, err = s.GetApproval(ctx, "r1", "gate")
		ok(t, err)
		same(t, got.Pending, false)
		same(t, answerers(got), []string{"ann", "bob"})
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, answeredBy(evs), []string{"ann", "bob"})
	})

	t.Run("a refused answer writes nothing and its error is returned as it is", func(t *testing.T) {
		s, _ := open(t)
		waitingStep(t, s, "r1", 1)
		ok(t, s.AnswerApproval(ctx, "r1", "gate", tally(state.ApprovalAnswer{By: "ann", Approved: false, At: at(time.Second)}, 1)))
		refusal := &fault.Error{Code: fault.Conflict, Message: "already answered"}
		err := s.AnswerApproval(ctx, "r1", "gate", func(_ *state.StepRecord, prev *state.Approval) (*state.Approval, []state.Event, error) {
			return &state.Approval{RunID: "r1", Step: "gate", Approved: true}, nil, refusal
		})
		if err != refusal {
			t.Fatalf("error = %v, want decide's error as it is", err)
		}
		err = s.AnswerApproval(ctx, "r1", "gate", tally(state.ApprovalAnswer{By: "bob", Approved: true, At: at(2 * time.Second)}, 1))
		errIs(t, err, errDecided)
		ok(t, s.AnswerApproval(ctx, "r1", "gate", func(*state.StepRecord, *state.Approval) (*state.Approval, []state.Event, error) {
			return nil, []state.Event{{Type: "ignored"}}, nil // nothing to write
		}))
		got, err := s.GetApproval(ctx, "r1", "gate")
		ok(t, err)
		same(t, got.Approved, false)
		same(t, answerers(got), []string{"ann"})
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, len(evs), 2) // approval.requested, ann's answer
	})

	t.Run("an approval with no step record is decided on nil records", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		var seen []any
		ok(t, s.AnswerApproval(ctx, "r1", "later", func(step *state.StepRecord, prev *state.Approval) (*state.Approval, []state.Event, error) {
			seen = []any{step, prev}
			return nil, nil, nil
		}))
		same(t, seen, []any{(*state.StepRecord)(nil), (*state.Approval)(nil)})
	})

	t.Run("an answer to a run never created is ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		err := s.AnswerApproval(ctx, "ghost", "gate", tally(state.ApprovalAnswer{By: "ann", Approved: true}, 1))
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("answers given at once", func(t *testing.T) {
		s, _ := open(t)
		RaceAnswers(t, s)
	})
}

// testSharedAnswers races the answers of RaceAnswers across both stores.
func testSharedAnswers(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	a, b := open(t)
	RaceAnswers(t, a, b)
}

// RaceAnswers answers approvals from many goroutines at once, spread over
// stores (one, or several on one database), through AnswerApproval: every
// answer is either accepted, and then in the record and its event in the
// run's log, or refused (decided already, twice by one approver, or a
// fault.Conflict) and in neither; the record is decided by exactly the
// answers a rule says. Each store must be empty.
func RaceAnswers(t *testing.T, stores ...state.Store) {
	const rounds = 4
	approvers := func(n int, rejectAt int) []state.ApprovalAnswer {
		out := make([]state.ApprovalAnswer, n)
		for i := range out {
			out[i] = state.ApprovalAnswer{By: fmt.Sprintf("p%02d", i), Approved: i != rejectAt, At: at(time.Duration(i+1) * time.Second)}
		}
		return out
	}
	t.Run("every one of many approvals is counted", func(t *testing.T) {
		for round := range rounds {
			id := fmt.Sprintf("all-%d", round)
			got := race(t, stores, id, approvers(12, -1), 12)
			if got.rec.Pending != (len(got.accepted) < 12) {
				t.Fatalf("%s: %d of 12 approvals accepted, record pending %v", id, len(got.accepted), got.rec.Pending)
			}
			same(t, len(got.decided), 0)
		}
	})
	t.Run("the approval that completes required is one, the others are refused", func(t *testing.T) {
		for round := range rounds {
			id := fmt.Sprintf("two-%d", round)
			got := race(t, stores, id, approvers(8, -1), 2)
			same(t, len(got.accepted)+len(got.decided)+len(got.conflicts), 8)
			if len(got.accepted) < 2 && len(got.decided) == 0 { // the rest were conflicts
				continue
			}
			if len(got.accepted) != 2 || got.rec.Pending || !got.rec.Approved {
				t.Fatalf("%s: accepted %v, record pending %v approved %v; want 2 approvals deciding it", id, got.accepted, got.rec.Pending, got.rec.Approved)
			}
		}
	})
	t.Run("an accepted rejection decides the approval rejected", func(t *testing.T) {
		for round := range rounds {
			id := fmt.Sprintf("reject-%d", round)
			got := race(t, stores, id, approvers(8, round%8), 20)
			rejecter := fmt.Sprintf("p%02d", round%8)
			if !slices.Contains(got.accepted, rejecter) {
				// The only way a rejection may be refused is a conflict its
				// caller is told of (other answers may be refused so too: a
				// transaction aborted more often than the store runs it again).
				if !slices.Contains(got.conflicts, rejecter) {
					t.Fatalf("%s: the rejection by %s was neither accepted nor refused as a conflict (conflicts %v, decided %v)", id, rejecter, got.conflicts, got.decided)
				}
				continue
			}
			if got.rec.Pending || got.rec.Approved {
				t.Fatalf("%s: the rejection by %s was accepted, the record says pending %v approved %v", id, rejecter, got.rec.Pending, got.rec.Approved)
			}
			if last := got.rec.Answers[len(got.rec.Answers)-1]; last.By != rejecter {
				t.Fatalf("%s: %s answered after the rejection by %s", id, last.By, rejecter)
			}
		}
	})
	t.Run("one approver answering twice at once is counted once", func(t *testing.T) {
		for round := range rounds {
			id := fmt.Sprintf("twice-%d", round)
			same4 := []state.ApprovalAnswer{}
			for i := range 4 {
				same4 = append(same4, state.ApprovalAnswer{By: "kim", Approved: true, At: at(time.Duration(i+1) * time.Second)})
			}
			got := race(t, stores, id, same4, 2)
			if len(got.conflicts) == 4 {
				continue
			}
			if len(got.accepted) != 1 || len(got.twice)+len(got.conflicts) != 3 || !got.rec.Pending {
				t.Fatalf("%s: accepted %d, refused as twice %d; want 1 and 3, the approval pending", id, len(got.accepted), len(got.twice))
			}
		}
	})
}

// raced is what race saw: the answerers whose answer was accepted, and
// refused (decided already, twice, a conflict), and the record after.
type raced struct {
	accepted, decided, twice, conflicts []string
	rec                                 *state.Approval
}

// race creates run id waiting on step "gate" (required approvals) and
// gives answers all at once, answer i on stores[i%len(stores)]. It checks
// that the accepted answers are those in the record and in the events.
func race(t *testing.T, stores []state.Store, id string, answers []state.ApprovalAnswer, required int) raced {
	t.Helper()
	waitingStep(t, stores[0], id, required)
	errs := make([]error, len(answers))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, ans := range answers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = stores[i%len(stores)].AnswerApproval(ctx, id, "gate", tally(ans, required))
		}()
	}
	start.Done()
	done.Wait()
	var got raced
	for i, err := range errs {
		by := answers[i].By
		switch {
		case err == nil:
			got.accepted = append(got.accepted, by)
		case errors.Is(err, errDecided):
			got.decided = append(got.decided, by)
		case errors.Is(err, errTwice):
			got.twice = append(got.twice, by)
		case fault.CodeOf(err) == fault.Conflict:
			got.conflicts = append(got.conflicts, by)
		default:
			t.Fatalf("%s: answer by %s: %v", id, by, err)
		}
	}
	rec, err := stores[len(stores)-1].GetApproval(ctx, id, "gate")
	ok(t, err)
	got.rec = rec
	want := sortedCopy(got.accepted)
	if ans := answerers(rec); !slices.Equal(sortedCopy(ans), want) {
		t.Fatalf("%s: accepted %v, the record holds %v", id, want, ans)
	}
	evs, err := stores[0].Events(ctx, id, 0, 0)
	ok(t, err)
	if by := answeredBy(evs); !slices.Equal(by, answerers(rec)) {
		t.Fatalf("%s: the record holds %v, the events say %v", id, answerers(rec), by)
	}
	return got
}

// waitingStep creates run id with its step "gate" waiting for required
// approvals.
func waitingStep(t *testing.T, s state.Store, id string, required int) {
	t.Helper()
	r := newRun(id, "pb", at(0))
	r.Status = state.RunWaiting
	create(t, s, r)
	ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: id, ID: "gate", Status: state.StepWaiting,
		Approval: &state.ApprovalRequest{Required: required}}, state.Event{Type: "approval.requested", Step: "gate"}))
}

// answerers lists who answered approval a, in its order.
func answerers(a *state.Approval) []string {
	out := []string{}
	for _, an := range a.Answers {
		out = append(out, an.By)
	}
	return out
}

// answeredBy lists who answered, by the approval.answered events in order.
func answeredBy(evs []state.Event) []string {
	out := []string{}
	for _, ev := range evs {
		if ev.Type == "approval.answered" {
			by, _ := ev.Data["by"].(string)
			out = append(out, by)
		}
	}
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}
