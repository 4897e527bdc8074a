package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

var ctx = context.Background()

func openTemp(t *testing.T, opts bolt.Options) (*bolt.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestContractWithClock(t *testing.T) {
	statetest.RunClocked(t, func(t *testing.T, now func() time.Time) state.Store {
		s, _ := openTemp(t, bolt.Options{Now: now})
		return s
	})
}

func TestContractOnRealClock(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Store {
		s, _ := openTemp(t, bolt.Options{})
		return s
	})
}

func TestReopen(t *testing.T) {
	t.Run("everything written survives closing and reopening the file", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		r := &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, CreatedAt: time.Unix(100, 0).UTC()}
		must(t, s.CreateRun(ctx, r, state.Event{Type: "run.created", Time: time.Unix(100, 0).UTC()}))
		must(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "b", Status: state.StepRunning}))
		must(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepRunning}, state.Event{Type: "step.started"}))
		must(t, s.PutCursor(ctx, "c", []byte("v")))
		_, _, err := s.AcquireLock(ctx, state.Lock{Key: "k", Owner: "r1"})
		must(t, err)
		_, err = s.Dedup(ctx, "d", 0)
		must(t, err)
		must(t, s.Close())

		s, err = bolt.Open(path, bolt.Options{})
		must(t, err)
		defer s.Close()
		got, err := s.GetRun(ctx, "r1")
		must(t, err)
		if got.Status != state.RunRunning {
			t.Errorf("status = %s", got.Status)
		}
		steps, err := s.Steps(ctx, "r1")
		must(t, err)
		if len(steps) != 2 || steps[0].ID != "b" || steps[1].ID != "a" {
			t.Errorf("steps = %+v, want b then a", steps)
		}
		// Sequence numbers continue after a reopen.
		must(t, s.AppendEvents(ctx, "r1", state.Event{Type: "run.resumed"}))
		evs, err := s.Events(ctx, "r1", 0, 0)
		must(t, err)
		if len(evs) != 3 || evs[2].Seq != 3 {
			t.Errorf("events = %+v, want seq 1..3", evs)
		}
		if v, err := s.GetCursor(ctx, "c"); err != nil || string(v) != "v" {
			t.Errorf("cursor = %q, %v", v, err)
		}
		if ok, _, _ := s.AcquireLock(ctx, state.Lock{Key: "k", Owner: "r2"}); ok {
			t.Error("lock was lost on reopen")
		}
		if seen, _ := s.Dedup(ctx, "d", 0); !seen {
			t.Error("dedup key was lost on reopen")
		}
	})

	t.Run("a read-only store reads and refuses writes", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		must(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}))
		must(t, s.Close())
		ro, err := bolt.Open(path, bolt.Options{ReadOnly: true})
		must(t, err)
		defer ro.Close()
		if _, err := ro.GetRun(ctx, "r1"); err != nil {
			t.Errorf("read-only get: %v", err)
		}
		if err := ro.PutCursor(ctx, "c", nil); err == nil {
			t.Error("read-only store accepted a write")
		}
	})

	t.Run("opening a missing file read-only fails without creating it", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent.db")
		_, err := bolt.Open(path, bolt.Options{ReadOnly: true})
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("error = %v, want not exist", err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("file was created")
		}
	})
}

func TestCreate(t *testing.T) {
	t.Run("a new file is private and so is its new directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state", "runbook")
		path := filepath.Join(dir, "state.db")
		s, err := bolt.Open(path, bolt.Options{})
		must(t, err)
		defer s.Close()
		fi, err := os.Stat(path)
		must(t, err)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("file mode = %v, want 0600", fi.Mode().Perm())
		}
		di, err := os.Stat(dir)
		must(t, err)
		if di.Mode().Perm() != 0o700 {
			t.Errorf("dir mode = %v, want 0700", di.Mode().Perm())
		}
	})

	t.Run("a new file records the format version", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		must(t, s.Close())
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
		must(t, err)
		defer db.Close()
		must(t, db.View(func(tx *bbolt.Tx) error {
			if v := tx.Bucket([]byte("meta")).Get([]byte("format_version")); string(v) != fmt.Sprint(state.FormatVersion) {
				t.Errorf("format_version = %q, want %d", v, state.FormatVersion)
			}
			return nil
		}))
	})

	t.Run("an empty file is initialized", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		must(t, os.WriteFile(path, nil, 0o600))
		s, err := bolt.Open(path, bolt.Options{})
		must(t, err)
		defer s.Close()
		must(t, s.CreateRun(ctx, &state.Run{ID: "r1"}))
	})

	t.Run("a bbolt file without buckets is initialized", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
		must(t, err)
		must(t, db.Close())
		s, err := bolt.Open(path, bolt.Options{})
		must(t, err)
		defer s.Close()
		must(t, s.CreateRun(ctx, &state.Run{ID: "r1"}))
	})

	t.Run("a directory is refused", func(t *testing.T) {
		if _, err := bolt.Open(t.TempDir(), bolt.Options{}); err == nil {
			t.Fatal("opened a directory")
		}
	})
}

func TestSaveStepCostIsLinear(t *testing.T) {
	// A SaveStep must not rewrite the run or the other steps: the bytes a
	// save writes stay flat as the run grows, far below the run's size.
	s, _ := openTemp(t, bolt.Options{NoSync: true})
	must(t, s.CreateRun(ctx, &state.Run{ID: "r1", Snapshot: make([]byte, 1<<20)}))
	n := 0
	perSave := func(count int) int64 {
		before := bolt.AllocatedBytes(s)
		for range count {
			n++
			id := fmt.Sprintf("step-%05d", n)
			must(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: id, Status: state.StepSucceeded},
				state.Event{Type: "step.succeeded", Step: id}))
		}
		return (bolt.AllocatedBytes(s) - before) / int64(count)
	}
	early := perSave(100)
	perSave(3000)
	late := perSave(100)
	t.Logf("bytes allocated per SaveStep: %d with 100 steps, %d with 3200", early, late)
	if late > 256<<10 {
		t.Errorf("a SaveStep allocates %d bytes: it rewrites more than its own record", late)
	}
	if late > 4*early+16<<10 {
		t.Errorf("SaveStep cost grew from %d to %d bytes as the run grew", early, late)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
