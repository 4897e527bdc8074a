package bolt_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

// v2Run is what writeVersion2File stores for run "old", as a format 2
// build stored it.
var (
	v2At    = time.Date(2026, 10, 1, 8, 0, 0, 0, time.UTC)
	v2Run   = &state.Run{ID: "old", Playbook: "pb", File: "pb.yaml", Status: state.RunWaiting, CreatedAt: v2At}
	v2Steps = []*state.StepRecord{ // in first-saved order
		{RunID: "old", ID: "b", Status: state.StepSucceeded, Attempts: 1, Outputs: map[string]any{"id": "c1"}, StartedAt: v2At, EndedAt: v2At},
		{RunID: "old", ID: "a", Status: state.StepRunning, Attempts: 2, StartedAt: v2At},
	}
	v2Events = []state.Event{
		{Seq: 1, Time: v2At, Type: "run.created"},
		{Seq: 2, Time: v2At, Type: "step.succeeded", Step: "b", Attempt: 1},
		{Seq: 3, Time: v2At, Type: "step.started", Step: "a", Attempt: 2},
	}
	v2Intent   = state.Intent{RunID: "old", Step: "a", Attempt: 2, Key: "k-a-2", CreatedAt: v2At, Data: []byte("req")}
	v2Approval = state.Approval{RunID: "old", Step: "a", Approved: true, By: "kim", Comment: "go", At: v2At}
)

// writeVersion2File writes, with bbolt alone, a state file as a format 2
// build left it: one bucket per run under rundata with five sub-buckets.
// Run "old" has two steps, three events, an intent and an approval; run
// "bare" was created without events and has nothing else.
func writeVersion2File(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	must(t, err)
	defer db.Close()
	seq := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	js := func(v any) []byte {
		data, err := json.Marshal(v)
		must(t, err)
		return data
	}
	bare := &state.Run{ID: "bare", Playbook: "pb", Status: state.RunPending, CreatedAt: v2At.Add(time.Second)}
	must(t, db.Update(func(tx *bbolt.Tx) error {
		top := map[string]*bbolt.Bucket{}
		for _, name := range []string{"meta", "runs", "snapshots", "runs_by_created", "rundata", "locks", "cursors", "dedup", "dedup_expiry"} {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			top[name] = b
		}
		if err := top["meta"].Put([]byte("format_version"), []byte("2")); err != nil {
			return err
		}
		for _, r := range []*state.Run{v2Run, bare} {
			if err := top["runs"].Put([]byte(r.ID), js(r)); err != nil {
				return err
			}
			key := binary.BigEndian.AppendUint64(nil, uint64(r.CreatedAt.UnixNano())^(1<<63))
			entry := js(map[string]any{"s": r.Status, "p": r.Playbook})
			if err := top["runs_by_created"].Put(append(key, r.ID...), entry); err != nil {
				return err
			}
			rb, err := top["rundata"].CreateBucket([]byte(r.ID))
			if err != nil {
				return err
			}
			for _, sub := range []string{"steps", "steporder", "events", "intents", "approvals"} {
				if _, err := rb.CreateBucket([]byte(sub)); err != nil {
					return err
				}
			}
		}
		rb := top["rundata"].Bucket([]byte("old"))
		for i, st := range v2Steps {
			if err := rb.Bucket([]byte("steps")).Put([]byte(st.ID), js(st)); err != nil {
				return err
			}
			if err := rb.Bucket([]byte("steporder")).Put(seq(uint64(i+1)), []byte(st.ID)); err != nil {
				return err
			}
		}
		if err := rb.Bucket([]byte("steporder")).SetSequence(uint64(len(v2Steps))); err != nil {
			return err
		}
		for _, ev := range v2Events {
			if err := rb.Bucket([]byte("events")).Put(seq(ev.Seq), js(ev)); err != nil {
				return err
			}
		}
		if err := rb.Bucket([]byte("events")).SetSequence(uint64(len(v2Events))); err != nil {
			return err
		}
		if err := rb.Bucket([]byte("intents")).Put([]byte("a"), js(v2Intent)); err != nil {
			return err
		}
		return rb.Bucket([]byte("approvals")).Put([]byte("a"), js(v2Approval))
	}))
}

// runView is everything the store returns about a run.
type runView struct {
	Run      *state.Run
	Listed   []*state.Run
	Steps    []*state.StepRecord
	StepB    *state.StepRecord
	Events   []state.Event
	After1   []state.Event
	Page     []state.Event // after 1, limit 1
	Intent   *state.Intent
	Approval *state.Approval
}

func readRun(t *testing.T, s *bolt.Store, id string) runView {
	t.Helper()
	var v runView
	var err error
	v.Run, err = s.GetRun(ctx, id)
	must(t, err)
	v.Listed, err = s.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{v.Run.Status}})
	must(t, err)
	v.Steps, err = s.Steps(ctx, id)
	must(t, err)
	v.StepB, err = s.GetStep(ctx, id, "b")
	must(t, err)
	v.Events, err = s.Events(ctx, id, 0, 0)
	must(t, err)
	v.After1, err = s.Events(ctx, id, 1, 0)
	must(t, err)
	v.Page, err = s.Events(ctx, id, 1, 1)
	must(t, err)
	v.Intent, err = s.GetIntent(ctx, id, "a")
	must(t, err)
	v.Approval, err = s.GetApproval(ctx, id, "a")
	must(t, err)
	return v
}

func wantV2View() runView {
	return runView{
		Run: v2Run, Listed: []*state.Run{v2Run}, Steps: v2Steps, StepB: v2Steps[0],
		Events: v2Events, After1: v2Events[1:], Page: v2Events[1:2],
		Intent: &v2Intent, Approval: &v2Approval,
	}
}

// rawRunData returns, for each run bucket, its sub-buckets and plain keys,
// and the file's format version.
func rawRunData(t *testing.T, path string) (subs, keys map[string][]string, version string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	must(t, err)
	defer db.Close()
	subs, keys = map[string][]string{}, map[string][]string{}
	must(t, db.View(func(tx *bbolt.Tx) error {
		version = string(tx.Bucket([]byte("meta")).Get([]byte("format_version")))
		rundata := tx.Bucket([]byte("rundata"))
		return rundata.ForEach(func(id, _ []byte) error {
			return rundata.Bucket(id).ForEach(func(k, v []byte) error {
				if v == nil {
					subs[string(id)] = append(subs[string(id)], string(k))
				} else {
					keys[string(id)] = append(keys[string(id)], strconv.Quote(string(k)))
				}
				return nil
			})
		})
	}))
	return subs, keys, version
}

// TestAVersion2FileIsReadThenFlattened: a file whose run buckets have
// sub-buckets (format 2) is read as it is when opened read-only, and its
// run buckets are flattened at the first open for writing, with every
// record, event number and step order number kept.
func TestAVersion2FileIsReadThenFlattened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	writeVersion2File(t, path)

	ro, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	must(t, err)
	if got := readRun(t, ro, "old"); !reflect.DeepEqual(got, wantV2View()) {
		t.Errorf("read-only: read\n%+v\nwant\n%+v", got, wantV2View())
	}
	if steps, err := ro.Steps(ctx, "bare"); err != nil || len(steps) != 0 {
		t.Errorf("read-only: steps of a run without any = %v, %v", steps, err)
	}
	must(t, ro.Close())
	if subs, _, version := rawRunData(t, path); version != "2" || len(subs["old"]) != 5 {
		t.Fatalf("a read-only open changed the file: version %q, sub-buckets %v", version, subs)
	}

	rw, err := bolt.Open(path, bolt.Options{})
	must(t, err)
	defer rw.Close()
	if got := readRun(t, rw, "old"); !reflect.DeepEqual(got, wantV2View()) {
		t.Errorf("after migration: read\n%+v\nwant\n%+v", got, wantV2View())
	}
	for _, id := range []string{"old", "bare"} {
		if _, err := rw.GetRun(ctx, id); err != nil {
			t.Errorf("run %s: %v", id, err)
		}
	}
	if evs, err := rw.Events(ctx, "bare", 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("events of a run created without any = %v, %v", evs, err)
	}
	must(t, rw.AppendEvents(ctx, "old", state.Event{Type: "log", Message: "after the migration"}))
	must(t, rw.SaveStep(ctx, &state.StepRecord{RunID: "old", ID: "c", Status: state.StepRunning},
		state.Event{Type: "step.started", Step: "c"}))
	must(t, rw.AppendEvents(ctx, "bare", state.Event{Type: "run.started"}))
	evs, err := rw.Events(ctx, "old", 3, 0)
	must(t, err)
	if len(evs) != 2 || evs[0].Seq != 4 || evs[1].Seq != 5 || evs[0].Message != "after the migration" {
		t.Errorf("events after 3 = %+v, want seq 4 and 5", evs)
	}
	if evs, _ := rw.Events(ctx, "bare", 0, 0); len(evs) != 1 || evs[0].Seq != 1 {
		t.Errorf("first event of a run created without any = %+v, want seq 1", evs)
	}
	steps, err := rw.Steps(ctx, "old")
	must(t, err)
	var order []string
	for _, st := range steps {
		order = append(order, st.ID)
	}
	if !reflect.DeepEqual(order, []string{"b", "a", "c"}) {
		t.Errorf("step order = %v, want b a c", order)
	}
	must(t, rw.Close())

	subs, keys, version := rawRunData(t, path)
	if version != strconv.Itoa(state.FormatVersion) {
		t.Errorf("format_version = %q after an open for writing, want %d", version, state.FormatVersion)
	}
	if len(subs) != 0 {
		t.Errorf("run buckets still have sub-buckets: %v", subs)
	}
	// The order numbers are the stored ones, the new step's the next.
	stored := map[string]bool{}
	for _, k := range keys["old"] {
		stored[k] = true
	}
	for n, id := range []string{"b", "a", "c"} {
		k := strconv.Quote("o" + string(binary.BigEndian.AppendUint64(nil, uint64(n+1))))
		if !stored[k] {
			t.Errorf("no order key %s for step %s among %v", k, id, keys["old"])
		}
	}
}

// TestStepIDsThatSpellSubBucketNames: in the flat layout a step "teps" is
// stored under the key "steps", an intent of step "ntents" under
// "intents": plain keys, never taken for the sub-buckets of format 2.
func TestStepIDsThatSpellSubBucketNames(t *testing.T) {
	s, path := openTemp(t, bolt.Options{})
	must(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}, state.Event{Type: "run.created"}))
	for _, id := range []string{"teps", "teporder", "vents", "ntents", "pprovals"} {
		must(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: id, Status: state.StepRunning},
			state.Event{Type: "step.started", Step: id}))
		must(t, s.PutIntent(ctx, state.Intent{RunID: "r1", Step: id, Key: "k-" + id}))
		must(t, statetest.PutApproval(ctx, s, state.Approval{RunID: "r1", Step: id, By: "kim"}))
	}
	must(t, s.Close())
	for _, opts := range []bolt.Options{{ReadOnly: true}, {}} {
		s, err := bolt.Open(path, opts)
		must(t, err)
		steps, err := s.Steps(ctx, "r1")
		must(t, err)
		evs, err := s.Events(ctx, "r1", 0, 0)
		must(t, err)
		if len(steps) != 5 || steps[0].ID != "teps" || len(evs) != 6 {
			t.Errorf("read-only %v: %d steps (first %+v), %d events; want 5 and 6", opts.ReadOnly, len(steps), steps[0], len(evs))
		}
		for _, id := range []string{"teps", "teporder", "vents", "ntents", "pprovals"} {
			if in, err := s.GetIntent(ctx, "r1", id); err != nil || in.Key != "k-"+id {
				t.Errorf("intent of %s = %+v, %v", id, in, err)
			}
			if a, err := s.GetApproval(ctx, "r1", id); err != nil || a.By != "kim" {
				t.Errorf("approval of %s = %+v, %v", id, a, err)
			}
		}
		must(t, s.Close())
	}
}

// TestNewRunsCostNoPageOfTheirOwn: runs created together (one group
// commit, as webhook deliveries arriving at once are) are stored inline in
// the rundata bucket's leaves, so a new run allocates well under a page.
func TestNewRunsCostNoPageOfTheirOwn(t *testing.T) {
	s, path := openTemp(t, bolt.Options{NoSync: true})
	source := []byte("name: audit\nsteps:\n  - id: a\n    uses: notice.send\n")
	newRun := func(i int) *state.Run {
		return &state.Run{ID: fmt.Sprintf("20261101T090000-%06d", i), Playbook: "audit", File: "audit.yaml",
			Snapshot: source, Hash: "h1", Status: state.RunPending, CreatedAt: v2At.Add(time.Duration(i) * time.Millisecond),
			Inputs: map[string]any{"phone": "01012345678"}}
	}
	created := state.Event{Type: "run.created", Time: v2At, Message: "run created for playbook audit"}
	// A first group, so the top-level buckets and the snapshot exist.
	must(t, s.CreateRun(ctx, newRun(0), created))

	const n = 100
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		wg.Go(func() { errs <- s.CreateRun(ctx, newRun(i), created) })
	}
	waitQueued(t, s, n)
	before := bolt.AllocatedBytes(s)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	perRun := (bolt.AllocatedBytes(s) - before) / n
	t.Logf("%d bytes allocated per new run", perRun)
	switch {
	case perRun >= 2048:
		t.Errorf("a new run allocates %d bytes: its bucket has a page of its own", perRun)
	case perRun >= 1024:
		t.Errorf("a new run allocates %d bytes: the append buckets' pages are split half full", perRun)
	}
	must(t, s.Close())

	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	must(t, err)
	defer db.Close()
	must(t, db.View(func(tx *bbolt.Tx) error {
		rundata := tx.Bucket([]byte("rundata"))
		inline := 0
		err := rundata.ForEach(func(id, _ []byte) error {
			if rundata.Bucket(id).Root() == 0 { // an inline bucket has no root page
				inline++
			}
			return nil
		})
		if inline != n+1 {
			t.Errorf("%d of %d run buckets are inline", inline, n+1)
		}
		return err
	}))
}
