package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// ExportStore is what the export contract needs of a store: Store,
// AuthStore, Exporter and Importer.
type ExportStore interface {
	state.Store
	state.AuthStore
	state.Exporter
	state.Importer
}

// RunExport runs the contract of state.Exporter and state.Importer: a
// store from from, filled through its normal methods, is exported and
// imported into a fresh store from to (of the same kind or another), and
// the two exports are compared record by record; the destination then
// goes on numbering where the source left off. Both stores take the
// suite's clock.
func RunExport(t *testing.T, from, to func(t *testing.T, now func() time.Time) ExportStore) {
	t.Helper()
	t.Run("an import of an export holds the same records", func(t *testing.T) {
		c := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC))
		src, dst := from(t, c.Now), to(t, c.Now)
		fill(t, src, c)
		want := exportAll(t, src)
		if len(want) == 0 {
			t.Fatal("the export of a filled store is empty")
		}
		kinds := map[state.Kind]int{}
		for _, r := range want {
			kinds[r.Kind]++
		}
		for _, k := range state.Kinds {
			if kinds[k] == 0 {
				t.Errorf("the export has no %s", k)
			}
		}
		if kinds[state.KindDedup] != 3 {
			t.Errorf("exported %d dedup keys, want 3 (the expired one left out)", kinds[state.KindDedup])
		}
		ctx := context.Background()
		// Two imports, as a copy in batches does: the run first, then
		// its records and the rest.
		must(t, dst.Import(ctx, want[:1]))
		must(t, dst.Import(ctx, want[1:]))
		got := exportAll(t, dst)
		compareRecords(t, want, got)
		checkAfterImport(t, dst)
	})
	t.Run("importing a run whose ID is taken fails with ErrExists and writes nothing", func(t *testing.T) {
		c := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
		src, dst := from(t, c.Now), to(t, c.Now)
		ctx := context.Background()
		must(t, src.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "p", Status: state.RunSucceeded}))
		must(t, dst.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "q", Status: state.RunFailed}))
		recs := exportAll(t, src)
		recs = append(recs, state.Record{Kind: state.KindCursor, Cursor: &state.Cursor{Key: "k", Value: []byte("v")}})
		if err := dst.Import(ctx, recs); !errors.Is(err, state.ErrExists) {
			t.Fatalf("Import of a taken run ID: got %v, want ErrExists", err)
		}
		if _, err := dst.GetCursor(ctx, "k"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("a failed import left a cursor: %v", err)
		}
	})
	t.Run("a step or event of a run not imported fails with ErrNotFound", func(t *testing.T) {
		c := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
		dst := to(t, c.Now)
		err := dst.Import(context.Background(), []state.Record{{Kind: state.KindStep, Step: &state.StepRecord{RunID: "nope", ID: "a", Status: state.StepSucceeded}}})
		if !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("Import of a step of no run: got %v, want ErrNotFound", err)
		}
		err = dst.Import(context.Background(), []state.Record{{Kind: state.KindEvent, Event: &state.RunEvent{RunID: "nope", Event: state.Event{Seq: 1, Type: "run.started"}}}})
		if !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("Import of an event of no run: got %v, want ErrNotFound", err)
		}
	})
}

// fill writes one of each kind of record through s's normal methods, and
// some that Export leaves out (an expired dedup key, a lock).
func fill(t *testing.T, s ExportStore, c *Clock) {
	ctx := context.Background()
	old := &state.Run{ID: "r-old", Playbook: "deploy", Status: state.RunFailed, Hash: "h1", Snapshot: []byte("name: deploy\n"),
		Inputs: map[string]any{"n": 3.0}, Error: &state.ErrorRecord{Code: "internal", Message: "boom"},
		CreatedAt: time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)}
	must(t, s.CreateRun(ctx, old, state.Event{Type: "run.started"}))
	must(t, s.SaveSteps(ctx, []*state.StepRecord{
		{RunID: "r-old", ID: "zeta", Status: state.StepSucceeded, Attempts: 1, Outputs: map[string]any{"x": "y"}},
		{RunID: "r-old", ID: "alpha", Status: state.StepFailed, Attempts: 2, Error: &state.ErrorRecord{Code: "invalid", Message: "no"}},
	}, state.Event{Type: "step.succeeded", Step: "zeta"}, state.Event{Type: "step.failed", Step: "alpha"}))
	must(t, s.AppendEvents(ctx, "r-old", state.Event{Type: "run.failed"}))
	must(t, s.PutIntent(ctx, state.Intent{RunID: "r-old", Step: "zeta", Attempt: 1, Key: "idem", Data: []byte("{}"), Resolved: true}))

	waiting := &state.Run{ID: "r-wait", Playbook: "deploy", Status: state.RunWaiting, Hash: "h1", Snapshot: []byte("name: deploy\n"), ConcurrencyKey: "prod"}
	must(t, s.CreateRun(ctx, waiting, state.Event{Type: "run.started"}))
	must(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r-wait", ID: "gate", Status: state.StepWaiting,
		Approval: &state.ApprovalRequest{Approvers: []string{"ops"}, Required: 2}}, state.Event{Type: "approval.requested", Step: "gate"}))
	must(t, PutApproval(ctx, s, state.Approval{RunID: "r-wait", Step: "gate", Approved: true, By: "ann", Pending: true,
		Answers: []state.ApprovalAnswer{{By: "ann", Approved: true, At: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)}}}))
	if ok, _, err := s.AcquireLock(ctx, state.Lock{Key: "prod", Owner: "r-wait"}); err != nil || !ok {
		t.Fatalf("AcquireLock: %v %v", ok, err)
	}

	hooked := &state.Run{ID: "r-hook", Playbook: "on-push", Status: state.RunSucceeded,
		Trigger: map[string]any{"type": "webhook", "route": "push", "key": "d1/0"}, Delivery: &state.DeliveryRef{ID: "d1", Hook: -1}}
	_, err := s.CommitDelivery(ctx, state.Delivery{Key: "d1", TTL: time.Hour, ID: "d1", Body: []byte(`{"ref":"main"}`),
		Units: []state.DeliveryUnit{{Claim: "d1/0", ClaimValue: []byte("r-hook"), Run: hooked, Events: []state.Event{{Type: "run.started"}}}},
		Done:  func([]string, [][]byte) []byte { return []byte("done") }})
	must(t, err)

	must(t, s.PutCursor(ctx, "schedule:nightly", []byte("2030-01-01T00:00:00Z")))
	if _, err := s.Dedup(ctx, "forever", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Dedup(ctx, "gone", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second) // "gone" expires; "d1" and its claim live an hour
	must(t, s.CreateToken(ctx, state.Token{Name: "bot", Hash: "aa", Roles: []string{"admin"}}))
	must(t, s.RevokeToken(ctx, "bot", time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC), "root"))
	must(t, s.CreateToken(ctx, state.Token{Name: "ci", Hash: "bb", Roles: []string{"operator"}, Playbooks: []string{"nks-*"}}))
	must(t, s.AppendAudit(ctx,
		state.AuditRecord{Identity: "root", Action: "token.create", Target: "bot", Result: "ok", Time: time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)},
		state.AuditRecord{Identity: "root", Action: "token.revoke", Target: "bot", Result: "ok", Detail: map[string]any{"why": "leaked"}},
		state.AuditRecord{Identity: "ann", Action: "run.approve", Target: "r-wait", Result: "denied"}))
	if _, err := s.PruneAudit(ctx, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil { // the numbers now start at 2
		t.Fatal(err)
	}
	// The outbox: one message sent, one failing, one never tried.
	if _, err := s.EnqueueNotifications(ctx, []state.Notification{note("run.failed/r-old@a", "r-old"), note("run.failed/r-old@b", "r-old")}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if _, err := s.EnqueueNotifications(ctx, []state.Notification{note("approval.waiting/r-wait/gate@a", "r-wait")}); err != nil {
		t.Fatal(err)
	}
	must(t, s.RecordAttempt(ctx, claimOne(t, s, "run.failed/r-old@a"), "A", state.Attempt{Sent: true}))
	must(t, s.RecordAttempt(ctx, claimOne(t, s, "run.failed/r-old@b"), "A", state.Attempt{Error: "503", RetryIn: time.Hour}))
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: 1, Reason: "noisy", By: "bob"}))
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: state.AllTriggers, Reason: "change freeze", By: "alice"}))
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p1", Pattern: "nks-*", Reason: "change freeze", By: "alice"}))
	c.Advance(time.Second)
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p2", Label: "team=ml", Reason: "quota", By: "bob"}))
}

// claimOne claims messages for "A" until key is among them, giving the
// others back as failed a moment ago, and returns key.
func claimOne(t *testing.T, s state.NotificationStore, key string) string {
	t.Helper()
	got, err := s.ClaimNotifications(context.Background(), "A", 10, time.Minute)
	must(t, err)
	for _, n := range got {
		if n.Key != key {
			must(t, s.RecordAttempt(context.Background(), n.Key, "A", state.Attempt{Error: "later", RetryIn: 0}))
		}
	}
	return key
}

func exportAll(t *testing.T, s state.Exporter) []state.Record {
	t.Helper()
	var out []state.Record
	must(t, s.Export(context.Background(), func(r state.Record) error {
		out = append(out, r)
		return nil
	}))
	return out
}

// compareRecords compares two exports record by record, as JSON. Dedup
// times are compared to the microsecond, which PostgreSQL keeps.
func compareRecords(t *testing.T, want, got []state.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("the import exports %d records, the source %d", len(got), len(want))
	}
	for i := range min(len(want), len(got)) {
		w, g := recordJSON(t, want[i]), recordJSON(t, got[i])
		if w != g {
			t.Errorf("record %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

func recordJSON(t *testing.T, r state.Record) string {
	if r.Dedup != nil {
		d := *r.Dedup
		d.FirstSeen = d.FirstSeen.Truncate(time.Microsecond).UTC()
		if !d.Expires.IsZero() {
			d.Expires = d.Expires.Truncate(time.Microsecond).UTC()
		}
		r.Dedup = &d
	}
	data, err := json.Marshal(r)
	must(t, err)
	return string(data)
}

// checkAfterImport checks that the imported store goes on where the
// source left off: the next event, step and audit record are numbered
// after the imported ones, and values read back through Store's methods.
func checkAfterImport(t *testing.T, s ExportStore) {
	ctx := context.Background()
	must(t, s.AppendEvents(ctx, "r-old", state.Event{Type: "note"}))
	evs, err := s.Events(ctx, "r-old", 0, 0)
	must(t, err)
	if len(evs) != 5 || evs[4].Seq != 5 || evs[4].Type != "note" {
		t.Errorf("events after import: %+v, want 5 with the new one numbered 5", evs)
	}
	must(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r-old", ID: "beta", Status: state.StepSucceeded}))
	steps, err := s.Steps(ctx, "r-old")
	must(t, err)
	if len(steps) != 3 || steps[0].ID != "zeta" || steps[1].ID != "alpha" || steps[2].ID != "beta" {
		t.Errorf("step order after import: %v, want zeta, alpha, beta", stepIDs(steps))
	}
	r, err := s.GetRun(ctx, "r-old")
	must(t, err)
	if string(r.Snapshot) != "name: deploy\n" || !r.CreatedAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)) {
		t.Errorf("imported run: snapshot %q, created %v", r.Snapshot, r.CreatedAt)
	}
	if body, err := s.GetDelivery(ctx, "d1"); err != nil || string(body) != `{"ref":"main"}` {
		t.Errorf("GetDelivery after import: %q, %v", body, err)
	}
	if v, err := s.DedupGet(ctx, "d1/0"); err != nil || string(v) != "r-hook" {
		t.Errorf("DedupGet of an imported claim: %q, %v", v, err)
	}
	if seen, err := s.Dedup(ctx, "d1", time.Hour); err != nil || !seen {
		t.Errorf("an imported delivery key is not seen: %v, %v", seen, err)
	}
	if locks, err := s.Locks(ctx); err != nil || len(locks) != 0 {
		t.Errorf("locks after import: %+v, %v; want none (locks are not copied)", locks, err)
	}
	must(t, s.AppendAudit(ctx, state.AuditRecord{Identity: "x", Action: "y", Result: "ok"}))
	recs, err := s.Audit(ctx, state.AuditFilter{})
	must(t, err)
	if len(recs) != 3 || recs[0].Seq != 2 || recs[2].Seq != 4 {
		t.Errorf("audit after import: %+v, want records 2, 3 and a new 4", recs)
	}
	checkAreasAfterImport(t, s)
}

// checkAreasAfterImport checks the stores' other areas after an import:
// the notification outbox, the schedule and run pauses and the tokens.
func checkAreasAfterImport(t *testing.T, s ExportStore) {
	ctx := context.Background()
	if ns, err := s.ListNotifications(ctx, state.NotificationFilter{Status: []state.NotificationStatus{state.NotifyFailing}}); err != nil || len(ns) != 2 {
		t.Errorf("failing notifications after import: %+v, %v; want 2", ns, err)
	}
	if added, err := s.EnqueueNotifications(ctx, []state.Notification{note("run.failed/r-old@a", "r-old")}); err != nil || len(added) != 0 {
		t.Errorf("an imported notification's key is enqueued again: %v, %v", added, err)
	}
	if due, err := s.ClaimNotifications(ctx, "B", 10, time.Minute); err != nil || len(due) != 1 || due[0].Key != "approval.waiting/r-wait/gate@a" {
		t.Errorf("the imported outbox's due messages: %+v, %v; want the one failed without a backoff", due, err)
	}
	if ps, err := s.SchedulePauses(ctx, "nightly"); err != nil || len(ps) != 2 || ps[0].Reason != "change freeze" || ps[1].By != "bob" {
		t.Errorf("schedule pauses after import: %+v, %v; want both, every trigger's first", ps, err)
	}
	if ps, err := s.RunPauses(ctx); err != nil || len(ps) != 2 || ps[0].Pattern != "nks-*" || ps[1].Why() != "paused by bob: quota" {
		t.Errorf("run pauses after import: %+v, %v; want both, oldest first", ps, err)
	}
	if err := s.PauseRuns(ctx, state.RunPause{ID: "p3", Pattern: "nks-*", Reason: "again", By: "carol"}); !errors.Is(err, state.ErrExists) {
		t.Errorf("an imported pause's selector can be paused again: %v", err)
	}
	if err := s.CreateToken(ctx, state.Token{Name: "ci", Hash: "cc"}); !errors.Is(err, state.ErrExists) {
		t.Errorf("an imported live token's name can be taken: %v", err)
	}
}
