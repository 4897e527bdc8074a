package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// loadPlan sizes parts (b) and (c): deliveries over keys, sent by senders
// one every pace, while rounds of faults are injected.
type loadPlan struct {
	senders, deliveries, keys, rounds int
	pace                              time.Duration
	// replicas adds kill -9 and SIGSTOP (past the lease) of replicas to
	// the database faults: part (c).
	replicas bool
}

// underFaults runs part (b) or (c): the load, and meanwhile each round of
// faults: every client backend terminated, a fast restart of PostgreSQL,
// terminated again, with replicas killed and stopped between them when
// the plan says so. Then it checks every acknowledged hook's run, the
// ledger's steps and the keys' spans, and returns the figures.
func (cp *campaign) underFaults(p loadPlan) figures {
	t := cp.t
	ds := campaignDeliveries(p.deliveries, p.keys)
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		cp.send(ds, p.senders, p.pace, time.Now().Add(time.Duration(p.deliveries)*p.pace+time.Minute))
	}()
	for round := range p.rounds {
		time.Sleep(1500 * time.Millisecond)
		cp.terminate(round)
		if p.replicas {
			cp.kill(round%3, time.Second)
		} else {
			time.Sleep(1500 * time.Millisecond)
		}
		began := time.Now()
		answered := pgtest.Restart(t, 0)
		cp.dbAnswered(answered)
		t.Logf("round %d: PostgreSQL restarted (fast) at %s, answering again at %s", round, clock(began), clock(answered))
		if p.replicas {
			cp.stop((round+1)%3, campaignLease+1500*time.Millisecond)
		} else {
			time.Sleep(1500 * time.Millisecond)
		}
		cp.terminate(round)
		if p.replicas {
			cp.kill((round+2)%3, 500*time.Millisecond)
		}
	}
	<-loaded
	cp.mu.Lock()
	answered := cp.answered
	cp.mu.Unlock()
	byHook := cp.waitFinal(answered.Add(finalWithin))
	cp.reportFailures()

	var f figures
	cp.checkHooks(byHook, &f)
	var runs []*state.Run
	for _, rs := range byHook {
		runs = append(runs, rs...)
	}
	lines := cp.readLedger()
	f.selfStopped = cp.noteSelfStops()
	cp.checkSteps(lines, runs, []string{"first", "second"}, &f)
	cp.checkOverlaps(lines, &f)
	return f
}

// terminate ends every client connection to the database.
func (cp *campaign) terminate(round int) {
	began := time.Now()
	n := pgtest.Terminate(cp.t)
	cp.dbAnswered(time.Now())
	cp.t.Logf("round %d: %d client backends terminated at %s (asked at %s)", round, n, clock(time.Now()), clock(began))
}

// answer is one approval answer of part (a) and what the replica said.
type answer struct {
	run, by string
	approve bool
	replica int
	code    int    // the last status
	last    string // the last answer's body
	refused int    // 409s before the last
	unheard int    // requests whose answer did not come
	at      time.Time
}

func (a *answer) String() string {
	verb := "approval"
	if !a.approve {
		verb = "rejection"
	}
	return fmt.Sprintf("%s's %s on replica %d (%d at %s after %d refusals)", a.by, verb, a.replica, a.code, clock(a.at), a.refused)
}

// raceFigures is what part (a) measured.
type raceFigures struct {
	races, accepted, refused, late, lost, rejections, rejectionsWon, final, afterTwice int
}

func (f raceFigures) String() string {
	return fmt.Sprintf("races %d, answers accepted %d (409 refusals retried %d; refused once the approval had ended %d), answers lost %d, rejections accepted %d, won %d, runs final %d of %d, continuations executed twice %d",
		f.races, f.accepted, f.refused, f.late, f.lost, f.rejections, f.rejectionsWon, f.final, f.races, f.afterTwice)
}

// approvalRaces runs part (a): n runs of the pair playbook waiting on a
// required: 2 approval, and for each, two answers given at the same
// instant on two other replicas than the one holding it: approve/approve
// for even runs, approve/reject for odd ones. A refused answer (409) is
// given again, as its caller would. Every answer accepted (200) must be in
// the run's approval record, every accepted rejection must fail the run,
// every run must end, and the step after the approval must run once for an
// approved run and never for a rejected one.
func (cp *campaign) approvalRaces(n int) raceFigures {
	t := cp.t
	ids := make([]string, n)
	for i := range n {
		code, m, err := cp.api("POST", cp.rs.url(i%3)+"/api/v1/playbooks/pair/runs", map[string]any{})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, code, "%v", m)
		ids[i] = m["id"].(string)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		waitStatus(t, cp.st, id, state.RunWaiting, time.Until(deadline))
	}

	answers := make([]*answer, 0, 2*n)
	for i, id := range ids {
		answers = append(answers,
			&answer{run: id, by: "alice", approve: true, replica: (i + 1) % 3},
			&answer{run: id, by: "bob", approve: i%2 == 0, replica: (i + 2) % 3})
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, a := range answers {
		wg.Go(func() {
			<-start
			cp.give(a)
		})
	}
	close(start)
	wg.Wait()

	f := raceFigures{races: n}
	final := map[string]*state.Run{}
	deadline = time.Now().Add(finalWithin)
	for _, id := range ids {
		for {
			r, err := cp.st.GetRun(context.Background(), id)
			require.NoError(t, err)
			final[id] = r
			if r.Status.Done() || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	afters := map[string]int{}
	for _, l := range cp.readLedger() {
		if l.step == "after" && l.edge == "start" {
			afters[l.run]++
		}
	}
	for i, id := range ids {
		cp.checkRace(final[id], answers[2*i:2*i+2], afters[id], &f)
	}
	return f
}

// give answers a.run until a replica accepts the answer (200), refuses it
// for another reason than a conflict, or refuses it with a conflict when
// the run no longer waits (the other answer ended the approval: the
// caller knows its answer did not count), at most 40 times. A request
// whose answer did not come (a loaded replica past the client's timeout)
// is sent again, as its caller would: when the first one was taken, the
// second is refused as this person's answer already given, and that
// says it was accepted.
func (cp *campaign) give(a *answer) {
	for range 40 {
		code, m, err := cp.api("POST", cp.rs.url(a.replica)+"/api/v1/runs/"+a.run+"/approve",
			map[string]any{"approve": a.approve, "step": "gate", "by": a.by})
		a.at = time.Now()
		if err != nil {
			a.code, a.last = 0, err.Error()
			a.unheard++
			time.Sleep(50 * time.Millisecond)
			continue
		}
		a.code, a.last = code, fmt.Sprint(m)
		if code == http.StatusConflict && a.unheard > 0 && strings.Contains(a.last, a.by+" already approved") {
			a.code = http.StatusOK // taken by a request whose answer was lost
			return
		}
		if a.code != http.StatusConflict {
			return
		}
		if r, err := cp.st.GetRun(context.Background(), a.run); err == nil && r.Status != state.RunWaiting {
			return
		}
		a.refused++
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRace checks one run of part (a) against the answers it was given.
func (cp *campaign) checkRace(r *state.Run, given []*answer, afters int, f *raceFigures) {
	t := cp.t
	ap, err := cp.st.GetApproval(context.Background(), r.ID, "gate")
	if err != nil {
		t.Errorf("run %s: its approval record: %v", r.ID, err)
		ap = &state.Approval{}
	}
	var recorded []string
	for _, x := range ap.Answers {
		recorded = append(recorded, fmt.Sprintf("%s approved=%t", x.By, x.Approved))
	}
	rejected := false
	for _, a := range given {
		f.refused += a.refused
		if a.code == http.StatusConflict && r.Status != state.RunWaiting {
			f.late++
			continue // refused: the approval had ended, and its caller was told
		}
		if a.code != http.StatusOK {
			t.Errorf("run %s: %s was never accepted: %s", r.ID, a, a.last)
			continue
		}
		f.accepted++
		if !a.approve {
			f.rejections++
			rejected = true
		}
		found := false
		for _, x := range ap.Answers {
			found = found || (x.By == a.by && x.Approved == a.approve)
		}
		if !found {
			f.lost++
			t.Errorf("answer lost: run %s: %s is not in the approval record (answers recorded: [%s]); the run is %s",
				r.ID, a, strings.Join(recorded, ", "), r.Status)
		}
	}
	if r.Status.Done() {
		f.final++
	} else {
		t.Errorf("run %s is %s %s after its answers (answers recorded: [%s])", r.ID, r.Status, finalWithin, strings.Join(recorded, ", "))
	}
	switch {
	case rejected && r.Status == state.RunFailed:
		f.rejectionsWon++
		if afters != 0 {
			t.Errorf("run %s was rejected, yet its step after the approval ran %d times", r.ID, afters)
		}
	case rejected:
		t.Errorf("run %s: a rejection was accepted, yet the run is %s (answers recorded: [%s])", r.ID, r.Status, strings.Join(recorded, ", "))
	case r.Status == state.RunSucceeded && afters != 1:
		if afters > 1 {
			f.afterTwice++
		}
		t.Errorf("run %s was approved by both; its step after the approval ran %d times, want once", r.ID, afters)
	case r.Status.Done() && r.Status != state.RunSucceeded:
		t.Errorf("%s, want succeeded: both approved it", describe(r))
	}
}

// logFigures logs a part's figures with the command that repeats it.
func logFigures(t *testing.T, figures fmt.Stringer, tags string) {
	t.Logf("%s\nrepeat: go test%s -count=1 -run '^%s$' -v ./cmd/runbook", figures, tags, t.Name())
}
