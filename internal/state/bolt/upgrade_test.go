package bolt_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// writeVersion3Runs writes, with bbolt alone, a format 3 file of n runs
// like run "w" of writeVersion3File (JSON values, a bucket over the inline
// limit), numbered w00000 on.
func writeVersion3Runs(t *testing.T, path string, n int) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, NoSync: true})
	must(t, err)
	defer db.Close()
	must(t, db.Update(createVersion3Buckets))
	for first := 0; first < n; first += 500 {
		must(t, db.Update(func(tx *bbolt.Tx) error {
			for i := first; i < min(first+500, n); i++ {
				if err := putVersion3Run(t, tx, fmt.Sprintf("w%05d", i), v3At.Add(time.Duration(i)*time.Second)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

// fileUse returns, with bbolt alone, the file's format version, its
// high-water mark and its free pages, in pages.
func fileUse(t *testing.T, path string) (version string, pages, free int) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true, PreLoadFreelist: true})
	must(t, err)
	defer db.Close()
	must(t, db.View(func(tx *bbolt.Tx) error {
		version = string(tx.Bucket([]byte("meta")).Get([]byte("format_version")))
		pages = int(tx.Size()) / db.Info().PageSize
		return nil
	}))
	return version, pages, db.Stats().FreePageN
}

// TestUpgradingALargeFileRewritesItInPlace: the upgrade of a file of an
// earlier format rewrites its runs in batches, each reusing the pages the
// ones before freed, so the file hardly grows (one transaction for the
// whole file held it all in memory and doubled the file: 8 -> 16 MiB for
// one 1,000-hook delivery's runs), and every run reads as before.
func TestUpgradingALargeFileRewritesItInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	const n = 3000
	writeVersion3Runs(t, path, n)
	_, before, _ := fileUse(t, path)

	s, err := bolt.Open(path, bolt.Options{NoSync: true})
	must(t, err)
	runs, err := s.ListRuns(ctx, state.RunFilter{})
	must(t, err)
	if len(runs) != n {
		t.Fatalf("%d runs listed after the upgrade, want %d", len(runs), n)
	}
	for _, id := range []string{"w00000", fmt.Sprintf("w%05d", n/2), fmt.Sprintf("w%05d", n-1)} {
		evs, err := s.Events(ctx, id, 0, 0)
		must(t, err)
		steps, err := s.Steps(ctx, id)
		must(t, err)
		if len(evs) != len(v3Events) || evs[7].Message != v3Events[7].Message || len(steps) != 1 || steps[0].RunID != id {
			t.Errorf("run %s after the upgrade: %d events, steps %+v", id, len(evs), steps)
		}
	}
	must(t, s.Close())
	version, after, free := fileUse(t, path)
	t.Logf("format 3 file of %d runs: %d pages; upgraded: %d pages, %d of them free", n, before, after, free)
	if version != strconv.Itoa(state.FormatVersion) {
		t.Errorf("format %s after the upgrade, want %d", version, state.FormatVersion)
	}
	// The first batch cannot reuse pages yet: a tenth more at most.
	if after > before+before/10 {
		t.Errorf("the upgrade grew the file from %d to %d pages", before, after)
	}
}
