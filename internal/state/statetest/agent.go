package statetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// RunAgents runs the contract of state.AgentStore against stores from
// open, one fresh and empty store per test (a whole Store: the runs'
// ends prune their assignments). Leases are on the store's clock: the
// tests that let one lapse wait for it (50 or 500 ms).
func RunAgents(t *testing.T, open func(t *testing.T) state.Store) {
	t.Helper()
	t.Run("a session is listed, renewed, and gone once its lease lapsed", func(t *testing.T) { testAgentSessionLease(t, open(t)) })
	t.Run("an attempt is placed on a matching agent with a free slot, the least loaded", func(t *testing.T) { testAgentPlacement(t, open(t)) })
	t.Run("a step's attempt finds the assignment placed before, for its new owner", func(t *testing.T) { testAgentAssignmentKey(t, open(t)) })
	t.Run("a result the owner cannot open is asked for again", func(t *testing.T) { testAgentResend(t, open(t)) })
	t.Run("work is delivered once, a result only from the session that holds it", func(t *testing.T) { testAgentWork(t, open(t)) })
	t.Run("a lapsed session's attempts are lost and its late result refused", func(t *testing.T) { testAgentLost(t, open(t)) })
	t.Run("a withdrawn attempt is cancelled on its agent", func(t *testing.T) { testAgentWithdraw(t, open(t)) })
	t.Run("mail is read once, in order, and bounded", func(t *testing.T) { testAgentMail(t, open(t)) })
	t.Run("capacity holds when owners place at once", func(t *testing.T) { testAgentPlacementRace(t, open(t)) })
	t.Run("an agent's limits per playbook hold, each on its own", func(t *testing.T) { testAgentLimits(t, open(t)) })
	t.Run("limits hold when owners place at once", func(t *testing.T) { testAgentLimitsRace(t, open(t)) })
	t.Run("the attempts of a run that ended are given up", func(t *testing.T) { testAgentPrune(t, open(t)) })
	t.Run("owners adding a step's attempt at once share one assignment", func(t *testing.T) { testAgentAssignmentRace(t, open(t)) })
}

func agentSession(id, name string, capacity int, labels map[string]string) state.AgentSession {
	return state.AgentSession{ID: id, Name: name, Version: "v1", Addr: "127.0.0.1", Token: "tok-" + name,
		Labels: labels, Capacity: capacity, Key: []byte("key of " + id)}
}

func agentAttempt(id, run string, attempt int, owner string, labels map[string]string) state.AgentAssignment {
	return state.AgentAssignment{ID: id, RunID: run, Step: "deploy", Attempt: attempt, Type: "shell",
		Labels: labels, Playbook: "deploy", Owner: owner, OwnerKey: []byte("key of " + owner)}
}

// playbookAttempt is an attempt of a run of playbook.
func playbookAttempt(id, playbook, owner string, labels map[string]string) state.AgentAssignment {
	a := agentAttempt(id, "run-"+id, 1, owner, labels)
	a.Playbook = playbook
	return a
}

// sealFor seals an attempt "for" a session: its ID and the session's key.
func sealFor(a state.AgentAssignment, s state.AgentSession) ([]byte, error) {
	return []byte(a.ID + " for " + string(s.Key)), nil
}

func placements(t *testing.T, s state.AgentStore, owner string) map[string]string {
	t.Helper()
	pl, err := s.PlaceAgentAssignments(context.Background(), owner, sealFor)
	must(t, err)
	out := map[string]string{}
	for _, a := range pl.Placed {
		out[a.ID] = a.Session
	}
	return out
}

func testAgentSessionLease(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	s1 := agentSession("s-1", "web-1", 2, map[string]string{"role": "web"})
	s1.Limits = []state.AgentLimit{{Pattern: "heavy-*", Max: 1}, {Pattern: "nightly", Max: 2}}
	must(t, s.OpenAgentSession(ctx, s1, time.Hour))
	must(t, s.OpenAgentSession(ctx, agentSession("s-2", "web-2", 1, nil), 50*time.Millisecond))
	all, err := s.AgentSessions(ctx)
	must(t, err)
	if len(all) != 2 || all[0].ID != "s-1" || all[1].ID != "s-2" {
		t.Fatalf("sessions: got %+v, want s-1 and s-2", all)
	}
	got := all[0]
	if got.Name != "web-1" || got.Capacity != 2 || got.Labels["role"] != "web" || got.Token != "tok-web-1" ||
		!bytes.Equal(got.Key, []byte("key of s-1")) || got.Version != "v1" || got.Addr != "127.0.0.1" ||
		fmt.Sprint(got.Limits) != "[heavy-*=1 nightly=2]" {
		t.Fatalf("session s-1 read back: %+v", got)
	}
	if got.Registered.IsZero() || got.Expires.Sub(got.Registered) < 59*time.Minute {
		t.Fatalf("session s-1's lease: registered %s, expires %s, want an hour after", got.Registered, got.Expires)
	}
	must(t, s.RenewAgentSession(ctx, "s-1", true, time.Hour))
	all, err = s.AgentSessions(ctx)
	must(t, err)
	if !all[0].Draining {
		t.Fatalf("a renewal that says draining: session %+v is not draining", all[0])
	}
	must(t, s.RenewAgentSession(ctx, "s-1", false, time.Hour))
	all, _ = s.AgentSessions(ctx)
	if !all[0].Draining {
		t.Fatal("a draining session stopped draining at its next renewal")
	}
	time.Sleep(120 * time.Millisecond)
	if err := s.RenewAgentSession(ctx, "s-2", false, time.Hour); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("renewing a lapsed session: got %v, want ErrAgentGone", err)
	}
	if _, err := s.ExpireAgentSessions(ctx, ""); err != nil {
		t.Fatal(err)
	}
	all, _ = s.AgentSessions(ctx)
	if len(all) != 1 || all[0].ID != "s-1" {
		t.Fatalf("after expiry: got %+v, want s-1 alone", all)
	}
	if _, err := s.ExpireAgentSessions(ctx, "s-1"); err != nil {
		t.Fatal(err)
	}
	all, _ = s.AgentSessions(ctx)
	if len(all) != 0 {
		t.Fatalf("a session ended by its ID is still listed: %+v", all)
	}
	if err := s.RenewAgentSession(ctx, "s-1", false, time.Hour); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("renewing an ended session: got %v, want ErrAgentGone", err)
	}
}

func testAgentPlacement(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	web := map[string]string{"role": "web"}
	must(t, s.OpenAgentSession(ctx, agentSession("s-a", "a", 2, map[string]string{"role": "web", "zone": "1"}), time.Hour))
	must(t, s.OpenAgentSession(ctx, agentSession("s-b", "b", 1, map[string]string{"role": "web"}), time.Hour))
	must(t, s.OpenAgentSession(ctx, agentSession("s-c", "c", 5, map[string]string{"role": "db"}), time.Hour))
	must(t, s.OpenAgentSession(ctx, agentSession("s-d", "d", 5, map[string]string{"role": "web", "zone": "1"}), time.Hour))
	must(t, s.RenewAgentSession(ctx, "s-d", true, time.Hour)) // draining: given nothing
	for i := range 5 {
		_, err := s.AddAgentAssignment(ctx, agentAttempt(fmt.Sprintf("a-%d", i), fmt.Sprint("run-", i), 1, "r1", web))
		must(t, err)
	}
	_, err := s.AddAgentAssignment(ctx, agentAttempt("z-1", "run-z", 1, "r1", map[string]string{"zone": "1"}))
	must(t, err)
	_, err = s.AddAgentAssignment(ctx, agentAttempt("other", "run-other", 1, "r2", web))
	must(t, err)

	got := placements(t, s, "r1")
	// Three web slots (a: 2, b: 1): a-0 on a or b, then the least
	// loaded; z-1 finds a full.
	if len(got) != 3 || got["a-0"] == "" || got["a-1"] == "" || got["a-2"] == "" {
		t.Fatalf("placed %v, want a-0, a-1 and a-2 (three web slots, oldest first)", got)
	}
	count := map[string]int{}
	for _, sess := range got {
		count[sess]++
	}
	if count["s-a"] != 2 || count["s-b"] != 1 {
		t.Fatalf("placed %v: want 2 on s-a (capacity 2) and 1 on s-b (capacity 1)", got)
	}
	a, err := s.AgentAssignment(ctx, "a-0")
	must(t, err)
	if a.Agent == "" || !bytes.Equal(a.Sealed, []byte("a-0 for key of "+a.Session)) || a.Placed.IsZero() {
		t.Fatalf("a placed attempt read back: %+v, want its agent, sealed for its session", a)
	}
	w, err := s.AgentAssignment(ctx, "a-3")
	must(t, err)
	if w.Session != "" || w.Sealed != nil {
		t.Fatalf("a waiting attempt: %+v", w)
	}
	if other, _ := s.AgentAssignment(ctx, "other"); other.Session != "" {
		t.Fatalf("placing r1's attempts placed r2's: %+v", other)
	}
	if got := placements(t, s, "r1"); len(got) != 0 {
		t.Fatalf("placed %v with every matching slot taken", got)
	}
	// A result frees a slot on its session; the oldest waiting attempt
	// that fits takes it.
	must(t, s.FinishAgentAssignment(ctx, "a-0", a.Session, []byte("done")))
	got = placements(t, s, "r1")
	if len(got) != 1 || got["a-3"] != a.Session {
		t.Fatalf("after a-0's result on %s: placed %v, want a-3 there", a.Session, got)
	}
	if _, err := s.AgentAssignment(ctx, "z-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddAgentAssignment(ctx, agentAttempt("db-1", "run-db", 1, "r1", map[string]string{"role": "db"})); err != nil {
		t.Fatal(err)
	}
	if got := placements(t, s, "r1"); got["db-1"] != "s-c" || len(got) != 1 {
		t.Fatalf("placed %v, want db-1 on s-c (its labels)", got)
	}
}

func testAgentAssignmentKey(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	must(t, s.OpenAgentSession(ctx, agentSession("s-1", "a", 1, nil), time.Hour))
	first, err := s.AddAgentAssignment(ctx, agentAttempt("a-1", "run-1", 1, "r1", nil))
	must(t, err)
	if first.ID != "a-1" || first.Owner != "r1" || first.Created.IsZero() {
		t.Fatalf("a new attempt: %+v", first)
	}
	placements(t, s, "r1")
	// r2 takes the run over and asks for the same attempt: it gets the
	// one r1 placed, now its own.
	again, err := s.AddAgentAssignment(ctx, agentAttempt("a-2", "run-1", 1, "r2", nil))
	must(t, err)
	if again.ID != "a-1" || again.Owner != "r2" || !bytes.Equal(again.OwnerKey, []byte("key of r2")) || again.Session != "s-1" {
		t.Fatalf("the same key again: got %+v, want a-1 placed on s-1, owned by r2", again)
	}
	if _, err := s.AgentAssignment(ctx, "a-2"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a second attempt of the same key was recorded: %v", err)
	}
	// The next attempt (the engine's resume of an interrupted step) too.
	third, err := s.AddAgentAssignment(ctx, agentAttempt("a-3", "run-1", 2, "r3", nil))
	must(t, err)
	if third.ID != "a-1" || third.Owner != "r3" {
		t.Fatalf("attempt 2 of the step: got %+v, want a-1, owned by r3", third)
	}
	// Another step is another assignment.
	other := agentAttempt("b-1", "run-1", 1, "r3", nil)
	other.Step = "check"
	got, err := s.AddAgentAssignment(ctx, other)
	must(t, err)
	if got.ID != "b-1" || got.Session != "" {
		t.Fatalf("another step: %+v", got)
	}
	// A withdrawn assignment is not found: the step is placed anew.
	must(t, s.WithdrawAgentAssignment(ctx, "a-1"))
	fresh, err := s.AddAgentAssignment(ctx, agentAttempt("a-4", "run-1", 3, "r3", nil))
	must(t, err)
	if fresh.ID != "a-4" || fresh.Session != "" {
		t.Fatalf("after a withdrawal: %+v, want a new waiting a-4", fresh)
	}
	all, err := s.AgentAssignments(ctx)
	must(t, err)
	if len(all) != 3 || all[0].ID != "a-1" || !all[0].Withdrawn || all[1].ID != "b-1" || all[2].ID != "a-4" {
		t.Fatalf("all assignments, oldest first: %+v", all)
	}
}

func testAgentResend(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	must(t, s.OpenAgentSession(ctx, agentSession("s-1", "a", 1, nil), time.Hour))
	_, err := s.AddAgentAssignment(ctx, agentAttempt("a-1", "run-1", 1, "r1", nil))
	must(t, err)
	placements(t, s, "r1")
	if _, err := s.TakeAgentWork(ctx, "s-1", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.ResendAgentResult(ctx, "a-1"); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("asking again for a result not sent: got %v, want ErrAgentGone", err)
	}
	must(t, s.FinishAgentAssignment(ctx, "a-1", "s-1", []byte("sealed to r1")))
	must(t, s.ResendAgentResult(ctx, "a-1"))
	a, err := s.AgentAssignment(ctx, "a-1")
	must(t, err)
	if a.Ended() || !a.Resend {
		t.Fatalf("asked again: %+v, want no result and resend", a)
	}
	work, err := s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	if len(work.Resends) != 1 || work.Resends[0] != "a-1" || len(work.Offers) != 0 {
		t.Fatalf("work: %+v, want a-1 asked again", work)
	}
	if work, _ := s.TakeAgentWork(ctx, "s-1", nil); len(work.Resends) != 0 {
		t.Fatalf("asked twice: %+v", work)
	}
	must(t, s.FinishAgentAssignment(ctx, "a-1", "s-1", []byte("sealed to r2")))
	a, _ = s.AgentAssignment(ctx, "a-1")
	if string(a.Result) != "sealed to r2" {
		t.Fatalf("the result sent again: %+v", a)
	}
}

func testAgentWork(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	must(t, s.OpenAgentSession(ctx, agentSession("s-1", "a", 3, nil), time.Hour))
	must(t, s.OpenAgentSession(ctx, agentSession("s-2", "b", 0, nil), time.Hour)) // no slot
	for i := range 2 {
		_, err := s.AddAgentAssignment(ctx, agentAttempt(fmt.Sprintf("a-%d", i), fmt.Sprint("run-", i), 1, "r1", nil))
		must(t, err)
	}
	work, err := s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	if len(work.Offers) != 0 || len(work.Cancels) != 0 {
		t.Fatalf("work before placement: %+v", work)
	}
	placements(t, s, "r1")
	work, err = s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	offers := work.Offers
	if len(offers) != 2 || !bytes.HasPrefix(offers[0].Sealed, []byte(offers[0].ID+" for ")) || !offers[0].Delivered {
		t.Fatalf("work: got %+v, want both attempts, sealed", offers)
	}
	// The answer that carried them did not reach the agent: a poll that
	// does not list them as running gets them again.
	again, err := s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	if len(again.Offers) != 2 {
		t.Fatalf("work whose answer was lost: got %+v, want both offered again", again.Offers)
	}
	// The agent runs them: they are acked, and not offered again even once
	// they leave its list (ended on the agent, their result on its way).
	if again, _ := s.TakeAgentWork(ctx, "s-1", []string{offers[0].ID, offers[1].ID}); len(again.Offers) != 0 {
		t.Fatalf("work delivered twice: %+v", again)
	}
	if again, _ := s.TakeAgentWork(ctx, "s-1", nil); len(again.Offers) != 0 {
		t.Fatalf("acked work delivered again: %+v", again)
	}
	if err := s.FinishAgentAssignment(ctx, "a-0", "s-2", []byte("x")); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("a result from a session that does not hold the attempt: got %v, want ErrAgentGone", err)
	}
	must(t, s.FinishAgentAssignment(ctx, "a-0", "s-1", []byte("sealed result")))
	if err := s.FinishAgentAssignment(ctx, "a-0", "s-1", []byte("again")); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("a second result: got %v, want ErrAgentGone", err)
	}
	a, err := s.AgentAssignment(ctx, "a-0")
	must(t, err)
	if !a.Ended() || string(a.Result) != "sealed result" {
		t.Fatalf("the finished attempt: %+v", a)
	}
	must(t, s.DeleteAgentAssignment(ctx, "a-0"))
	must(t, s.DeleteAgentAssignment(ctx, "a-0"))
	if _, err := s.AgentAssignment(ctx, "a-0"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a deleted attempt: %v", err)
	}
	if err := s.FinishAgentAssignment(ctx, "a-0", "s-1", []byte("late")); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("a result of a deleted attempt: got %v, want ErrAgentGone", err)
	}
}

func testAgentLost(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	// A lease long enough for the placement below on a loaded machine.
	must(t, s.OpenAgentSession(ctx, agentSession("s-1", "gone", 2, nil), 500*time.Millisecond))
	must(t, s.OpenAgentSession(ctx, agentSession("s-2", "alive", 1, map[string]string{"x": "y"}), time.Hour))
	_, err := s.AddAgentAssignment(ctx, agentAttempt("a-1", "run-1", 1, "r1", nil))
	must(t, err)
	_, err = s.AddAgentAssignment(ctx, agentAttempt("a-2", "run-2", 1, "r1", map[string]string{"x": "y"}))
	must(t, err)
	if got := placements(t, s, "r1"); got["a-1"] != "s-1" || got["a-2"] != "s-2" {
		t.Fatalf("placed %v", got)
	}
	time.Sleep(600 * time.Millisecond)
	lost, err := s.ExpireAgentSessions(ctx, "")
	must(t, err)
	if len(lost) != 1 || lost[0].ID != "a-1" || lost[0].Lost != "gone" || lost[0].Owner != "r1" {
		t.Fatalf("lost: got %+v, want a-1 lost by agent gone", lost)
	}
	a, err := s.AgentAssignment(ctx, "a-1")
	must(t, err)
	if !a.Ended() || a.Lost != "gone" {
		t.Fatalf("a lost attempt read back: %+v", a)
	}
	if err := s.FinishAgentAssignment(ctx, "a-1", "s-1", []byte("late")); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("a lapsed session's result: got %v, want ErrAgentGone", err)
	}
	if lost, _ := s.ExpireAgentSessions(ctx, ""); len(lost) != 0 {
		t.Fatalf("lost twice: %+v", lost)
	}
	if b, _ := s.AgentAssignment(ctx, "a-2"); b.Ended() {
		t.Fatalf("a live session's attempt ended: %+v", b)
	}
}

func testAgentWithdraw(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	must(t, s.OpenAgentSession(ctx, agentSession("s-1", "a", 1, nil), time.Hour))
	_, err := s.AddAgentAssignment(ctx, agentAttempt("a-1", "run-1", 1, "r1", nil))
	must(t, err)
	_, err = s.AddAgentAssignment(ctx, agentAttempt("a-2", "run-2", 1, "r1", nil))
	must(t, err)
	placements(t, s, "r1") // a-1 on s-1, a-2 waits
	must(t, s.WithdrawAgentAssignment(ctx, "a-2"))
	if _, err := s.AgentAssignment(ctx, "a-2"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a withdrawn waiting attempt is kept: %v", err)
	}
	_, err = s.PostAgentMail(ctx, state.AgentMail{To: "a-1", Body: []byte("line")})
	must(t, err)
	must(t, s.WithdrawAgentAssignment(ctx, "a-1"))
	if err := s.FinishAgentAssignment(ctx, "a-1", "s-1", []byte("x")); !errors.Is(err, state.ErrAgentGone) {
		t.Fatalf("a result of a withdrawn attempt: got %v, want ErrAgentGone", err)
	}
	work, err := s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	if len(work.Offers) != 0 || len(work.Cancels) != 1 || work.Cancels[0] != "a-1" {
		t.Fatalf("work after the withdrawal: %+v, want a-1 cancelled", work)
	}
	if _, err := s.AgentAssignment(ctx, "a-1"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a cancelled attempt is kept: %v", err)
	}
	if m, _ := s.AgentMail(ctx, "a-1"); len(m) != 0 {
		t.Fatalf("a cancelled attempt's mail is kept: %+v", m)
	}
	if again, _ := s.TakeAgentWork(ctx, "s-1", nil); len(again.Cancels) != 0 {
		t.Fatalf("cancelled twice: %+v", again)
	}
	must(t, s.WithdrawAgentAssignment(ctx, "none"))
}

func testAgentMail(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	for i := range 3 {
		_, err := s.PostAgentMail(ctx, state.AgentMail{To: "a-1", Body: []byte(fmt.Sprint("line ", i))})
		must(t, err)
	}
	_, err := s.PostAgentMail(ctx, state.AgentMail{To: "a-10", Body: []byte("other")})
	must(t, err)
	got, err := s.AgentMail(ctx, "a-1")
	must(t, err)
	if len(got) != 3 || string(got[0].Body) != "line 0" || string(got[2].Body) != "line 2" || got[0].Seq >= got[1].Seq {
		t.Fatalf("mail for a-1: %+v", got)
	}
	if again, _ := s.AgentMail(ctx, "a-1"); len(again) != 0 {
		t.Fatalf("mail read twice: %+v", again)
	}
	if other, _ := s.AgentMail(ctx, "a-10"); len(other) != 1 || string(other[0].Body) != "other" {
		t.Fatalf("mail for a-10: %+v", other)
	}
	big := bytes.Repeat([]byte("x"), state.MaxAgentMail/4)
	for range 4 {
		_, err := s.PostAgentMail(ctx, state.AgentMail{To: "a-2", Body: big})
		must(t, err)
	}
	if _, err := s.PostAgentMail(ctx, state.AgentMail{To: "a-2", Body: []byte("one more")}); !errors.Is(err, state.ErrAgentMailFull) {
		t.Fatalf("mail beyond the bound: got %v, want ErrAgentMailFull", err)
	}
	if _, err := s.PostAgentMail(ctx, state.AgentMail{To: "a-3", Body: []byte("another recipient")}); err != nil {
		t.Fatalf("one full recipient refuses another's mail: %v", err)
	}
	if got, _ := s.AgentMail(ctx, "a-2"); len(got) != 4 {
		t.Fatalf("read %d of the 4 mails for a-2", len(got))
	}
	if _, err := s.PostAgentMail(ctx, state.AgentMail{To: "a-2", Body: []byte("after reading")}); err != nil {
		t.Fatalf("mail once the recipient read: %v", err)
	}
}

// testAgentPlacementRace has owners place at once on one agent: it never
// holds more than its capacity.
func testAgentPlacementRace(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	const capacity, owners, each = 3, 4, 5
	must(t, s.OpenAgentSession(ctx, agentSession("s-1", "a", capacity, nil), time.Hour))
	for o := range owners {
		for i := range each {
			_, err := s.AddAgentAssignment(ctx, agentAttempt(fmt.Sprintf("a-%d-%d", o, i), fmt.Sprintf("run-%d-%d", o, i), 1, fmt.Sprint("r", o), nil))
			must(t, err)
		}
	}
	total := placeAtOnce(t, s, owners)
	work, err := s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	if total != capacity || len(work.Offers) != capacity {
		t.Fatalf("owners placing at once placed %d (%d offered) on an agent of capacity %d", total, len(work.Offers), capacity)
	}
}

// placeAtOnce has owners r0, r1... place their waiting attempts at once
// and returns how many they placed. A slow seal holds each placement's
// transaction open, so that they overlap.
func placeAtOnce(t *testing.T, s state.AgentStore, owners int) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for o := range owners {
		wg.Go(func() {
			pl, err := s.PlaceAgentAssignments(context.Background(), fmt.Sprint("r", o), func(a state.AgentAssignment, sess state.AgentSession) ([]byte, error) {
				time.Sleep(20 * time.Millisecond)
				return sealFor(a, sess)
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			total += len(pl.Placed)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

func testAgentAssignmentRace(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	const owners, rounds = 4, 20
	for r := range rounds {
		run := fmt.Sprint("run-", r)
		ids := make([]string, owners)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for o := range owners {
			wg.Go(func() {
				<-start
				got, err := s.AddAgentAssignment(ctx, agentAttempt(fmt.Sprintf("a-%d-%d", r, o), run, 1, fmt.Sprint("r", o), nil))
				if err != nil {
					t.Errorf("owner %d adding %s's attempt: %v", o, run, err)
					return
				}
				ids[o] = got.ID
			})
		}
		close(start)
		wg.Wait()
		for o := 1; o < owners; o++ {
			if ids[o] != ids[0] {
				t.Fatalf("%s: owners adding its attempt at once got assignments %v, want one", run, ids)
			}
		}
	}
	all, err := s.AgentAssignments(ctx)
	must(t, err)
	if len(all) != rounds {
		t.Fatalf("%d assignments recorded for %d steps", len(all), rounds)
	}
}

// testAgentLimits: an agent never holds more attempts of the playbooks a
// limit of its selects than the limit allows; the attempt goes to
// another matching agent, or waits saying which limits hold it. Each
// limit counts on its own; capacity bounds them all.
func testAgentLimits(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	p := map[string]string{"pool": "p"}
	limited := agentSession("s-a", "limited", 4, p)
	limited.Limits = []state.AgentLimit{{Pattern: "heavy-*", Max: 1}}
	must(t, s.OpenAgentSession(ctx, limited, time.Hour))
	must(t, s.OpenAgentSession(ctx, agentSession("s-b", "free", 1, p), time.Hour))
	for _, a := range []state.AgentAssignment{
		playbookAttempt("h-1", "heavy-x", "r1", p), playbookAttempt("h-2", "heavy-y", "r1", p),
		playbookAttempt("h-3", "heavy-x", "r1", p), playbookAttempt("l-1", "light", "r1", p),
	} {
		_, err := s.AddAgentAssignment(ctx, a)
		must(t, err)
	}
	pl, err := s.PlaceAgentAssignments(ctx, "r1", sealFor)
	must(t, err)
	got := map[string]string{}
	for _, a := range pl.Placed {
		got[a.ID] = a.Session
	}
	// h-1 on the limited agent (equal loads, lower ID), h-2 on the other
	// (the limit holds), h-3 waits (limited: at its limit; free: full),
	// l-1 on the limited agent (no limit selects light).
	if len(got) != 3 || got["h-1"] != "s-a" || got["h-2"] != "s-b" || got["l-1"] != "s-a" {
		t.Fatalf("placed %v, want h-1 and l-1 on s-a, h-2 on s-b (s-a's limit heavy-*=1)", got)
	}
	if why := pl.Limited["h-3"]; why != "limited (heavy-*=1)" || len(pl.Limited) != 1 {
		t.Fatalf("why h-3 waits: %q (all: %v), want the limit of agent limited", why, pl.Limited)
	}
	a, err := s.AgentAssignment(ctx, "h-1")
	must(t, err)
	if a.Playbook != "heavy-x" {
		t.Fatalf("an attempt's playbook read back: %+v", a)
	}
	// Asked again, the placement says the same, placing nothing.
	if again, err := s.PlaceAgentAssignments(ctx, "r1", sealFor); err != nil || len(again.Placed) != 0 || again.Limited["h-3"] != "limited (heavy-*=1)" {
		t.Fatalf("placing again: %+v, %v; want nothing placed, h-3 held by the limit", again, err)
	}
	// The heavy attempt on s-a ends: h-3 takes its place there.
	must(t, s.FinishAgentAssignment(ctx, "h-1", "s-a", []byte("done")))
	if got := placements(t, s, "r1"); len(got) != 1 || got["h-3"] != "s-a" {
		t.Fatalf("after h-1's result: placed %v, want h-3 on s-a", got)
	}

	// Two limits on one agent count on their own, and capacity bounds
	// the sum: heavy-*=2, *-nightly=1, capacity 3.
	q := map[string]string{"pool": "q"}
	two := agentSession("s-c", "two", 3, q)
	two.Limits = []state.AgentLimit{{Pattern: "heavy-*", Max: 2}, {Pattern: "*-nightly", Max: 1}}
	must(t, s.OpenAgentSession(ctx, two, time.Hour))
	for _, a := range []state.AgentAssignment{
		playbookAttempt("q-1", "heavy-nightly", "r2", q), // heavy 1, nightly 1
		playbookAttempt("q-2", "heavy-nightly", "r2", q), // nightly at its limit
		playbookAttempt("q-3", "heavy-day", "r2", q),     // heavy 2
		playbookAttempt("q-4", "heavy-day", "r2", q),     // heavy at its limit
		playbookAttempt("q-5", "light-nightly", "r2", q), // nightly at its limit
		playbookAttempt("q-6", "light-day", "r2", q),     // the third slot
		playbookAttempt("q-7", "light-day", "r2", q),     // full
	} {
		_, err := s.AddAgentAssignment(ctx, a)
		must(t, err)
	}
	pl, err = s.PlaceAgentAssignments(ctx, "r2", sealFor)
	must(t, err)
	got = map[string]string{}
	for _, a := range pl.Placed {
		got[a.ID] = a.Session
	}
	if len(got) != 3 || got["q-1"] != "s-c" || got["q-3"] != "s-c" || got["q-6"] != "s-c" {
		t.Fatalf("placed %v, want q-1, q-3 and q-6 on s-c", got)
	}
	want := map[string]string{"q-2": "two (*-nightly=1)", "q-4": "two (heavy-*=2)", "q-5": "two (*-nightly=1)"}
	if fmt.Sprint(pl.Limited) != fmt.Sprint(want) {
		t.Fatalf("why they wait: %v, want %v (q-7 waits for a slot, no limit)", pl.Limited, want)
	}
}

// testAgentLimitsRace has owners place at once attempts a limit selects
// on one agent: it never holds more of them than the limit allows.
func testAgentLimitsRace(t *testing.T, s state.AgentStore) {
	ctx := context.Background()
	const limit, owners, each = 2, 4, 5
	sess := agentSession("s-1", "a", 10, nil)
	sess.Limits = []state.AgentLimit{{Pattern: "heavy-*", Max: limit}}
	must(t, s.OpenAgentSession(ctx, sess, time.Hour))
	for o := range owners {
		for i := range each {
			_, err := s.AddAgentAssignment(ctx, playbookAttempt(fmt.Sprintf("a-%d-%d", o, i), fmt.Sprint("heavy-", i), fmt.Sprint("r", o), nil))
			must(t, err)
		}
	}
	total := placeAtOnce(t, s, owners)
	work, err := s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	if total != limit || len(work.Offers) != limit {
		t.Fatalf("owners placing at once placed %d (%d offered) heavy-* attempts on an agent whose limit is %d", total, len(work.Offers), limit)
	}
}

// testAgentPrune: the assignments of a run recorded ended (while no owner
// executed it) are given up once it ended grace ago: a placed one still
// running is withdrawn (its agent told to stop it), a waiting or ended
// one deleted with its mail. Those of a live run, of a run that ended
// lately and of a run the store does not hold stay.
func testAgentPrune(t *testing.T, s state.Store) {
	ctx := context.Background()
	must(t, s.OpenAgentSession(ctx, agentSession("s-1", "a", 2, nil), time.Hour))
	ended := newRun("run-ended", "deploy", time.Now().Add(-2*time.Hour))
	ended.Status, ended.EndedAt = state.RunCancelled, time.Now().Add(-time.Hour)
	lately := newRun("run-lately", "deploy", time.Now().Add(-time.Hour))
	lately.Status, lately.EndedAt = state.RunFailed, time.Now()
	live := newRun("run-live", "deploy", time.Now())
	live.Status = state.RunRunning
	for _, r := range []*state.Run{ended, lately, live} {
		must(t, s.CreateRun(ctx, r))
	}
	step := func(id, run, step string) state.AgentAssignment {
		a := agentAttempt(id, run, 1, "r-dead", nil)
		a.Step = step
		return a
	}
	for _, a := range []state.AgentAssignment{
		step("running", "run-ended", "one"), step("done", "run-ended", "two"), step("live", "run-live", "one"),
		step("waiting", "run-ended", "three"), step("late", "run-lately", "one"), step("unknown", "run-none", "one"),
	} {
		_, err := s.AddAgentAssignment(ctx, a)
		must(t, err)
	}
	if got := placements(t, s, "r-dead"); len(got) != 2 || got["running"] != "s-1" || got["done"] != "s-1" {
		t.Fatalf("placed %v, want running and done on s-1", got)
	}
	must(t, s.FinishAgentAssignment(ctx, "done", "s-1", []byte("sealed for a dead owner")))
	_, err := s.PostAgentMail(ctx, state.AgentMail{To: "done", Body: []byte("line")})
	must(t, err)

	sessions, err := s.PruneAgentAssignments(ctx, time.Minute)
	must(t, err)
	if len(sessions) != 1 || sessions[0] != "s-1" {
		t.Fatalf("pruned: sessions %v, want s-1 (told to stop running)", sessions)
	}
	for _, id := range []string{"done", "waiting"} {
		if _, err := s.AgentAssignment(ctx, id); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("assignment %s of the ended run: got %v, want it deleted", id, err)
		}
	}
	if m, _ := s.AgentMail(ctx, "done"); len(m) != 0 {
		t.Errorf("a deleted assignment's mail is kept: %+v", m)
	}
	if a, err := s.AgentAssignment(ctx, "running"); err != nil || !a.Withdrawn {
		t.Fatalf("the running attempt of the ended run: %+v, %v; want it withdrawn", a, err)
	}
	for _, id := range []string{"live", "late", "unknown"} {
		if a, err := s.AgentAssignment(ctx, id); err != nil || a.Withdrawn {
			t.Errorf("assignment %s: %+v, %v; want it kept as it was", id, a, err)
		}
	}
	work, err := s.TakeAgentWork(ctx, "s-1", nil)
	must(t, err)
	if len(work.Cancels) != 1 || work.Cancels[0] != "running" {
		t.Fatalf("work after the prune: %+v, want running cancelled", work)
	}
	if again, err := s.PruneAgentAssignments(ctx, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("pruning again: %v, %v; want nothing", again, err)
	}
	all, err := s.AgentAssignments(ctx)
	must(t, err)
	if len(all) != 3 {
		t.Fatalf("left: %+v, want live, late and unknown", all)
	}
	// Once the recent end is grace ago, its attempt goes too.
	if _, err := s.PruneAgentAssignments(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AgentAssignment(ctx, "late"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("the waiting attempt of a run that ended, with no grace: %v, want it deleted", err)
	}
}
