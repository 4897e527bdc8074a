package bolt_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// TestNewRunsCostNoPageOfTheirOwn: runs created together (one group
// commit, as webhook deliveries arriving at once are) are stored inline in
// the rundata bucket's leaves, so a new run allocates well under a page.
func TestNewRunsCostNoPageOfTheirOwn(t *testing.T) {
	s, path := openTemp(t, bolt.Options{NoSync: true})
	at := time.Date(2026, 10, 1, 8, 0, 0, 0, time.UTC)
	source := []byte("name: audit\nsteps:\n  - id: a\n    uses: notice.send\n")
	newRun := func(i int) *state.Run {
		return &state.Run{ID: fmt.Sprintf("20261101T090000-%06d", i), Playbook: "audit", File: "audit.yaml",
			Snapshot: source, Hash: "h1", Status: state.RunPending, CreatedAt: at.Add(time.Duration(i) * time.Millisecond),
			Inputs: map[string]any{"phone": "01012345678"}}
	}
	created := state.Event{Type: "run.created", Time: at, Message: "run created for playbook audit"}
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
