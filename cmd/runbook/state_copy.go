package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

var stateVerb = &verb{
	name:    "state",
	summary: "move the whole state between stores (a bbolt file, a PostgreSQL database), back a state file up",
	run:     cmdState,
}

func cmdState(ctx context.Context, a *app, args []string) error {
	return dispatchSub(ctx, a, "state",
		`A state location is a bbolt file path or a postgres:// URL, as for --state.`,
		[]subVerb{
			{"copy", "copy every run and record from one store to an empty one, then verify the counts", cmdStateCopy},
			{"backup", "copy a state file while runbook serve or run holds it, verified before it is kept", cmdStateBackup},
		}, args)
}

// copyBatch is how many records one Import writes (one transaction).
const copyBatch = 1000

// cmdStateCopy copies everything a store holds into an empty one and
// verifies the copy by counting each kind of record at both ends.
func cmdStateCopy(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:  "state copy",
		usage: "--from LOCATION --to LOCATION [--dry-run]",
		summary: "Copy the whole state from one store to another: a bbolt file to a PostgreSQL database " +
			"(postgres://…), back, or file to file. Runs with their playbook snapshots, steps, events (with their " +
			"numbers), intents, approvals, webhook delivery bodies, cursors, live dedup keys, tokens (their hashes) " +
			"and the audit log are copied, then the steps' output; locks are not (a lock belongs to a running process: a run takes its key " +
			"again when it resumes). The destination must hold nothing: a copy is never a merge. A source file is " +
			"opened read-only and refused while a runbook process holds it. At the end both stores are counted, " +
			"kind by kind; any difference exits 1.",
		details: "Stop every runbook serve and run using the source first: a database source is read in one " +
			"consistent snapshot, but what is written after it is not copied.",
	})
	from := fs.String("from", "", "the `store` to copy from: a state file or a postgres:// URL")
	to := fs.String("to", "", "the `store` to copy to (empty, or a file that does not exist yet)")
	dry := fs.Bool("dry-run", false, "count what the source holds; write nothing")
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	if *from == "" || (*to == "" && !*dry) {
		return usageErrorf("state copy", "state copy needs --from and --to")
	}
	if !*dry && sameLocation(*from, *to) {
		return usageErrorf("state copy", "--from and --to name the same store (%s)", displayLocation(*from))
	}
	src, err := openCopySource(*from)
	if err != nil {
		return err
	}
	defer src.Close()
	if *dry {
		counts, err := countRecords(ctx, src)
		if err != nil {
			return storeError(err)
		}
		fmt.Fprintf(a.stdout, "%s holds:\n", displayLocation(*from))
		printCounts(a.stdout, counts, nil)
		return printLocks(ctx, a.stdout, src)
	}
	dst, created, err := openCopyDestination(ctx, *to)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Copying %s to %s\n", displayLocation(*from), displayLocation(*to))
	counts, err := copyRecords(ctx, src, dst)
	if err == nil {
		var lines int
		if lines, err = copyOutput(ctx, src, dst); err == nil && lines > 0 {
			fmt.Fprintf(a.stdout, "Copied %d lines of step output.\n", lines)
		}
	}
	if err != nil {
		_ = dst.Close()
		hint := "the destination holds part of the copy: empty it (or pick another) and copy again"
		if created {
			_ = os.Remove(*to)
			hint = "the new file " + *to + " was removed; fix the cause and copy again"
		}
		return &exitError{code: 1, err: fmt.Errorf("copy: %w", err), hint: hint}
	}
	got, err := countRecords(ctx, dst)
	_ = dst.Close()
	if err != nil {
		return storeError(fmt.Errorf("count the copy: %w", err))
	}
	printCounts(a.stdout, counts, got)
	if err := printLocks(ctx, a.stdout, src); err != nil {
		return err
	}
	for _, k := range state.Kinds {
		if counts[k] != got[k] {
			return &exitError{code: 1, err: fmt.Errorf("verification failed: the destination holds %d %s, the source %d", got[k], k, counts[k]),
				hint: "empty the destination and copy again; report the difference if it persists"}
		}
	}
	fmt.Fprintln(a.stdout, "Every count matches.")
	return nil
}

// sameLocation reports two locations naming one store: the same file, or
// the same URL.
func sameLocation(a, b string) bool {
	if isDSN(a) || isDSN(b) {
		return a == b
	}
	x, errA := filepath.Abs(a)
	y, errB := filepath.Abs(b)
	return errA == nil && errB == nil && x == y
}

// openCopySource opens the store to copy from: a file read-only (it must
// exist, and no other process may hold it), or a database.
func openCopySource(loc string) (state.Store, error) {
	var st state.Store
	var err error
	if isDSN(loc) {
		st, err = openLocation(loc, lockTimeout)
	} else {
		if _, serr := os.Stat(loc); serr != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf("--from %s: %w", loc, serr), hint: "runbook state copy --from STATE_FILE --to postgres://USER@HOST/DB"}
		}
		timeout := lockTimeout
		disc, hasDisc := readDiscovery(loc)
		if hasDisc {
			timeout = 50 * time.Millisecond
		}
		st, err = bolt.Open(loc, bolt.Options{ReadOnly: true, Timeout: timeout})
		if errors.Is(err, state.ErrLocked) && hasDisc {
			return nil, &exitError{code: 1, err: err, hint: fmt.Sprintf("stop the runbook serve recorded in %s (pid %d, at %s), then copy again", server.DiscoveryFile(loc), disc.PID, disc.URL)}
		}
	}
	if err != nil {
		return nil, storeError(err)
	}
	return st, nil
}

// openCopyDestination opens the store to copy to and checks that it holds
// nothing; created reports a file this call created.
func openCopyDestination(ctx context.Context, loc string) (dst state.Store, created bool, err error) {
	if !isDSN(loc) {
		_, serr := os.Stat(loc)
		created = errors.Is(serr, os.ErrNotExist)
	}
	st, err := openLocation(loc, lockTimeout)
	if err != nil {
		return nil, false, storeError(err)
	}
	fail := func(err error) (state.Store, bool, error) {
		_ = st.Close()
		if created {
			_ = os.Remove(loc)
		}
		return nil, false, err
	}
	counts, err := countRecords(ctx, st)
	if err != nil {
		return fail(storeError(err))
	}
	for _, k := range state.Kinds {
		if counts[k] > 0 {
			return fail(&exitError{code: 1,
				err:  fmt.Errorf("the destination %s is not empty (%s: %d); state copy never merges", displayLocation(loc), k, counts[k]),
				hint: "copy to a new file or an empty database"})
		}
	}
	return st, created, nil
}

// copyRecords exports src into dst in batches and returns the counts of
// what it copied.
func copyRecords(ctx context.Context, src state.Exporter, dst state.Importer) (map[state.Kind]int, error) {
	counts := map[state.Kind]int{}
	batch := make([]state.Record, 0, copyBatch)
	err := src.Export(ctx, func(r state.Record) error {
		counts[r.Kind]++
		batch = append(batch, r)
		if len(batch) < copyBatch {
			return nil
		}
		err := dst.Import(ctx, batch)
		batch = batch[:0]
		return err
	})
	if err == nil && len(batch) > 0 {
		err = dst.Import(ctx, batch)
	}
	return counts, err
}

func countRecords(ctx context.Context, s state.Exporter) (map[state.Kind]int, error) {
	counts := map[state.Kind]int{}
	err := s.Export(ctx, func(r state.Record) error {
		counts[r.Kind]++
		return nil
	})
	return counts, err
}

// printCounts prints a table of the counts per kind: the source's, and
// the destination's when dst is not nil.
func printCounts(w io.Writer, src, dst map[state.Kind]int) {
	if dst == nil {
		fmt.Fprintf(w, "%-14s %8s\n", "KIND", "COUNT")
		for _, k := range state.Kinds {
			fmt.Fprintf(w, "%-14s %8d\n", k, src[k])
		}
		return
	}
	fmt.Fprintf(w, "%-14s %8s %12s\n", "KIND", "SOURCE", "DESTINATION")
	for _, k := range state.Kinds {
		mark := ""
		if src[k] != dst[k] {
			mark = "  DIFFERS"
		}
		fmt.Fprintf(w, "%-14s %8d %12d%s\n", k, src[k], dst[k], mark)
	}
}

// printLocks says how many locks the source holds: they are not copied.
func printLocks(ctx context.Context, w io.Writer, src state.Store) error {
	locks, err := src.Locks(ctx)
	if err != nil {
		return storeError(err)
	}
	if len(locks) > 0 {
		fmt.Fprintf(w, "Locks: %d held in the source, not copied (a lock belongs to the process running its run; the run takes its key again when it resumes).\n", len(locks))
	}
	return nil
}
