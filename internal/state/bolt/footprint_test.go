package bolt_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// waitingRun is run i as `runbook serve` leaves a run of a one-step
// approval playbook once it is parked: created, started, its step waiting
// with the approval's question, then the run waiting. These are the
// records and events the engine writes for it (seen in a real serve's
// file), in the writes it makes.
func waitingRun(t *testing.T, s *bolt.Store, i int) {
	t.Helper()
	at := time.Date(2026, 11, 27, 20, 14, 15, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	id := fmt.Sprintf("20261127T201415-%06x", i)
	r := &state.Run{ID: id, Playbook: "waiting", File: "/srv/runbook/playbooks/waiting.yaml", Hash: strings.Repeat("e4", 32),
		Snapshot: []byte("version: 1\nname: waiting\nsteps:\n  - {id: gate, uses: approval, with: {message: \"go?\"}}\n"),
		Trigger:  map[string]any{"type": "api", "by": "server-***en"}, Status: state.RunPending, CreatedAt: at}
	must(t, s.CreateRun(ctx, r, state.Event{Time: at, Type: "run.created", Message: "run created for playbook waiting"}))
	r.Status, r.StartedAt, r.Owner = state.RunRunning, at.Add(time.Millisecond), "vm/22844@31302"
	must(t, s.SaveRun(ctx, r, state.Event{Time: r.StartedAt, Type: "run.started", Message: "run started"}))
	step := &state.StepRecord{RunID: id, ID: "gate", Status: state.StepRunning, Attempts: 1, StartedAt: r.StartedAt}
	must(t, s.SaveStep(ctx, step, state.Event{Time: r.StartedAt, Type: "step.started", Step: "gate", Attempt: 1, Message: "attempt 1"}))
	step.Status, step.Approval = state.StepWaiting, &state.ApprovalRequest{Required: 1}
	must(t, s.SaveStep(ctx, step,
		state.Event{Time: r.StartedAt, Type: "approval.requested", Step: "gate",
			Message: "waiting for approval: go? (answer with: runbook runs approve " + id + " gate)"},
		state.Event{Time: r.StartedAt, Type: "step.waiting", Step: "gate", Attempt: 1, Message: "waiting for approval"}))
	r.Status, r.AnswerOnly = state.RunWaiting, true
	must(t, s.SaveRun(ctx, r, state.Event{Time: r.StartedAt, Type: "run.waiting", Message: "run is waiting for an approval"}))
}

// runsUsage returns the Usage of s, which holds n runs (what they are:
// "waiting", "finished"), logged as a table, and the bytes of the file in
// use per run; it fails the test unless every run's bucket is inline.
func runsUsage(t *testing.T, s *bolt.Store, n int, what string) (u *bolt.Usage, perRun int) {
	t.Helper()
	u, err := s.Usage(ctx)
	must(t, err)
	var sb strings.Builder
	must(t, u.Write(&sb))
	t.Logf("%d %s runs:\n%s", n, what, sb.String())
	if u.Runs != n || u.InlineRuns != n {
		t.Errorf("%d of %d %s runs' buckets are inline, want all", u.InlineRuns, u.Runs, what)
	}
	return u, (u.FilePages - u.FreePages) * u.PageSize / n
}

// maxBytesPerWaitingRun bounds the file a waiting run takes, all pages
// counted (its record, index entry and bucket, and the branch pages and
// free space around them). Issue 20 wants 10,000 waiting runs under
// `runbook serve` in 60 MB of resident memory, of which the process's own
// is about 25 MB and the state file, which bbolt maps whole, the rest: at
// 2 KB a run, 10,000 runs are 20 MB.
const maxBytesPerWaitingRun = 2048

// maxWaitingRecord bounds the record of a run waiting on an approval: its
// status, times, owner and trigger, about 110 bytes.
const maxWaitingRecord = 128

// TestAWaitingRunsBucketIsInlineAndSmall: the bucket of a run waiting on
// an approval is stored inline in its parent's leaf (no page of its own),
// and the whole file stays under maxBytesPerWaitingRun per run.
func TestAWaitingRunsBucketIsInlineAndSmall(t *testing.T) {
	s, _ := openTemp(t, bolt.Options{NoSync: true})
	const n = 300
	for i := range n {
		waitingRun(t, s, i)
	}
	u, perRun := runsUsage(t, s, n, "waiting")
	// Its record holds its own fields; its source (playbook, file, hash:
	// about 80 bytes) is a number (format 8). It was 203 bytes before.
	for _, p := range u.Parts {
		if p.Name == "runs" && p.ValueBytes/p.Keys > maxWaitingRecord {
			t.Errorf("a waiting run's record takes %d bytes, want at most %d", p.ValueBytes/p.Keys, maxWaitingRecord)
		}
	}
	if perRun > maxBytesPerWaitingRun {
		t.Errorf("the file takes %d bytes per waiting run, want at most %d", perRun, maxBytesPerWaitingRun)
	}
}

// webhookRun is run i of the shipped sms-unsubscribe playbook as a
// 1,000-hook delivery creates it (one run per hook), with its first event.
func webhookRun(i int) (*state.Run, state.Event) {
	at := time.Date(2026, 11, 27, 20, 14, 35, 0, time.UTC).Add(time.Duration(i) * time.Microsecond)
	number := fmt.Sprintf("010%08d", 20000000+i)
	hook := fmt.Sprintf("5f0c1d2e-9a8b-4c7d-8e6f-%012d", i)
	r := &state.Run{ID: fmt.Sprintf("20261127T201435-%06x", i), Playbook: "sms-unsubscribe",
		File: "/srv/runbook/playbooks/sms-unsubscribe.yaml", Hash: strings.Repeat("dc", 32), Snapshot: []byte("name: sms-unsubscribe\n"),
		Inputs: map[string]any{"enterprise": "런북 주식회사", "hook_id": hook, "number": number,
			"requested_at": "2026-11-22T09:00:00.000+09:00", "unsubscribe_no": "0808885555"},
		Trigger: map[string]any{"delivery": "hooks-1", "event": "UNSUBSCRIBE", "key": "sms-unsubscribe/0/id:" + hook,
			"route": "sms", "type": "webhook"},
		Delivery: &state.DeliveryRef{ID: "20261127T201435-HUUXG5WNNN4JZBBO", Hook: i},
		Status:   state.RunPending, ConcurrencyKey: "sms-suppress-" + number, CreatedAt: at}
	return r, state.Event{Time: at, Type: "run.created", Message: "run created for playbook sms-unsubscribe"}
}

// finishRun runs a created webhookRun to its end as `runbook serve` does:
// its three steps (file.line, a skipped http.request, a log) succeed,
// with the records and events the engine writes for them (seen in a real
// serve's file), in the writes it makes.
func finishRun(t *testing.T, s *bolt.Store, r *state.Run) {
	at := r.CreatedAt
	number := r.Inputs["number"].(string)
	ev := func(typ, step string, attempt int, msg string, data map[string]any) state.Event {
		return state.Event{Time: at, Type: typ, Step: step, Attempt: attempt, Message: msg, Data: data}
	}
	r.Status, r.StartedAt, r.Owner, r.Deadline = state.RunRunning, at, "vm/23649@33321", at.Add(10*time.Minute)
	must(t, s.SaveRun(ctx, r, ev("run.started", "", 0, "run started", nil)))
	file := &state.StepRecord{RunID: r.ID, ID: "file", Status: state.StepRunning, Attempts: 1, StartedAt: at}
	must(t, s.SaveStep(ctx, file, ev("step.started", "file", 1, "attempt 1", nil)))
	file.Status, file.EndedAt = state.StepSucceeded, at.Add(23*time.Millisecond)
	file.Outputs = map[string]any{"added": true, "path": "/srv/runbook/state/sms-suppression.txt"}
	must(t, s.SaveStep(ctx, file, ev("step.succeeded", "file", 1, "succeeded", map[string]any{"duration_ms": 23})))
	api := &state.StepRecord{RunID: r.ID, ID: "api", Status: state.StepSkipped, EndedAt: at}
	done := &state.StepRecord{RunID: r.ID, ID: "done", Status: state.StepSucceeded, Attempts: 1, StartedAt: at, EndedAt: at,
		Outputs: map[string]any{"message": number + " is suppressed (added to the file)"}}
	r.Status, r.EndedAt = state.RunSucceeded, at.Add(40*time.Millisecond)
	must(t, s.SaveRunSteps(ctx, r, []*state.StepRecord{api, done},
		ev("step.skipped", "api", 0, "condition is false", nil),
		ev("step.started", "done", 1, "attempt 1", nil),
		state.Event{Time: at, Type: "log", Step: "done", Attempt: 1, Level: "INFO", Message: number + " is suppressed (added to the file)"},
		ev("step.succeeded", "done", 1, "succeeded", map[string]any{"duration_ms": 0}),
		ev("run.succeeded", "", 0, "run succeeded", nil)))
}

// maxBytesPerFinishedRun bounds the file a finished webhook run takes,
// all pages counted. Such a run's bucket (about 670 bytes) and record
// (about 580) fill their pages to 65-90% as bbolt splits them, about
// 2.1 KB a run in all. (Issue 20's budget for a 1,000-hook delivery, 2 MB, leaves about 1.5 KB
// a run once its body and dedup claims are counted: not met yet.)
const maxBytesPerFinishedRun = 2560

// TestAFinishedRunsBucketIsInlineAndSmall: the bucket of a webhook run
// that ran its three steps is still stored inline, and the file stays
// under maxBytesPerFinishedRun per run.
func TestAFinishedRunsBucketIsInlineAndSmall(t *testing.T) {
	s, _ := openTemp(t, bolt.Options{NoSync: true})
	must(t, s.Import(ctx, []state.Record{{Kind: state.KindDelivery, // the runs refer to it
		Delivery: &state.StoredDelivery{ID: "20261127T201435-HUUXG5WNNN4JZBBO", Body: []byte("{}")}}}))
	// The runs are created together, as one delivery's are, then run by
	// eight executors at once.
	const n, executors = 300, 8
	runs := make([]*state.Run, n)
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	for i := range runs {
		r, created := webhookRun(i)
		runs[i] = r
		wg.Go(func() { must(t, s.CreateRun(ctx, r, created)) })
	}
	waitQueued(t, s, n)
	release()
	wg.Wait()
	next := make(chan *state.Run)
	for range executors {
		wg.Go(func() {
			for r := range next {
				finishRun(t, s, r)
			}
		})
	}
	for _, r := range runs {
		next <- r
	}
	close(next)
	wg.Wait()
	if _, perRun := runsUsage(t, s, n, "finished"); perRun > maxBytesPerFinishedRun {
		t.Errorf("the file takes %d bytes per finished run, want at most %d", perRun, maxBytesPerFinishedRun)
	}
}
