package bolt_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

func snapRun(id, hash, source string) *state.Run {
	return &state.Run{ID: id, Playbook: "p", File: "p.yaml", Snapshot: []byte(source), Hash: hash,
		Status: state.RunPending, CreatedAt: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
}

// rawRecord returns the stored record of a run and the stored snapshots.
func rawRecord(t *testing.T, path, id string) (record *state.Run, snapshots int) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	must(t, err)
	defer db.Close()
	must(t, db.View(func(tx *bbolt.Tx) error {
		var err error
		if record, err = bolt.DecodeRun(tx, id, tx.Bucket([]byte("runs")).Get([]byte(id))); err != nil {
			return err
		}
		if b := tx.Bucket([]byte("snapshots")); b != nil {
			snapshots = b.Stats().KeyN
		}
		return nil
	}))
	return record, snapshots
}

// TestSnapshotsAreStoredOncePerHash: runs of one source share a stored
// snapshot, and every read gives each run its own.
func TestSnapshotsAreStoredOncePerHash(t *testing.T) {
	s, path := openTemp(t, bolt.Options{})
	must(t, s.CreateRun(ctx, snapRun("r1", "h1", "steps: [one]")))
	must(t, s.CreateRun(ctx, snapRun("r2", "h1", "steps: [one]")))
	must(t, s.CreateRun(ctx, snapRun("r3", "h2", "steps: [two]")))
	must(t, s.SaveRun(ctx, snapRun("r2", "h1", "steps: [one]")))
	for id, want := range map[string]string{"r1": "steps: [one]", "r2": "steps: [one]", "r3": "steps: [two]"} {
		r, err := s.GetRun(ctx, id)
		must(t, err)
		if string(r.Snapshot) != want {
			t.Errorf("run %s snapshot = %q, want %q", id, r.Snapshot, want)
		}
	}
	runs, err := s.ListRuns(ctx, state.RunFilter{})
	must(t, err)
	for _, r := range runs {
		if len(r.Snapshot) == 0 {
			t.Errorf("listed run %s has no snapshot", r.ID)
		}
	}
	r1, _ := s.GetRun(ctx, "r1")
	r1.Snapshot[0] = 'X' // a caller's copy: the next read is unchanged
	if again, _ := s.GetRun(ctx, "r1"); again.Snapshot[0] != 's' {
		t.Error("a read shares its snapshot bytes with the store")
	}
	must(t, s.Close())
	rec, n := rawRecord(t, path, "r1")
	if len(rec.Snapshot) > 0 {
		t.Error("the run record still holds its snapshot")
	}
	if n != 2 {
		t.Errorf("%d snapshots stored, want 2 (one per hash)", n)
	}
}

// TestASnapshotWhoseHashHoldsAnotherSourceStaysInline: the store does not
// trust a hash over the bytes.
func TestASnapshotWhoseHashHoldsAnotherSourceStaysInline(t *testing.T) {
	s, path := openTemp(t, bolt.Options{})
	must(t, s.CreateRun(ctx, snapRun("r1", "h", "first")))
	must(t, s.CreateRun(ctx, snapRun("r2", "h", "second")))
	for id, want := range map[string]string{"r1": "first", "r2": "second"} {
		r, err := s.GetRun(ctx, id)
		must(t, err)
		if string(r.Snapshot) != want {
			t.Errorf("run %s snapshot = %q, want %q", id, r.Snapshot, want)
		}
	}
	must(t, s.Close())
	if rec, _ := rawRecord(t, path, "r2"); len(rec.Snapshot) == 0 {
		t.Error("the second source is not kept in its record")
	}
}

// TestAListingHoldsEachSnapshotOnce: listing many runs of one playbook
// does not copy its source once per run (a server lists every run at its
// start: 10,000 waiting runs of an 8 KB playbook were 80 MB of copies).
func TestAListingHoldsEachSnapshotOnce(t *testing.T) {
	s, _ := openTemp(t, bolt.Options{NoSync: true})
	source := strings.Repeat("# a playbook of some size\n", 320) // 8 KB
	const n = 500
	for i := range n {
		must(t, s.CreateRun(ctx, snapRun(fmt.Sprintf("r%04d", i), "h1", source)))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	runs, err := s.ListRuns(ctx, state.RunFilter{})
	runtime.ReadMemStats(&after)
	must(t, err)
	if len(runs) != n || string(runs[0].Snapshot) != source || string(runs[n-1].Snapshot) != source {
		t.Fatalf("listed %d runs, the first and last with snapshots of %d and %d bytes", len(runs), len(runs[0].Snapshot), len(runs[n-1].Snapshot))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(n*len(source)/4) {
		t.Errorf("listing %d runs of one %d-byte source allocated %d bytes: the source is copied per run", n, len(source), alloc)
	}
}
