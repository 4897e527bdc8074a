package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/runbook/runbook/internal/state"
)

var _ state.Store = (*Store)(nil)

// Top-level buckets. Per-run data lives in one nested bucket per run under
// bucketRunData (see rundata.go).
var (
	bucketMeta      = []byte("meta")
	bucketRuns      = []byte("runs")
	bucketByCreated = []byte("runs_by_created")
	bucketRunData   = []byte("rundata")
	bucketLocks     = []byte("locks")
	bucketCursors   = []byte("cursors")
	bucketDedup     = []byte("dedup")
	bucketDedupExp  = []byte("dedup_expiry")
	bucketSnapshots = []byte("snapshots")

	keyFormatVersion = []byte("format_version")

	topBuckets = [][]byte{
		bucketMeta, bucketRuns, bucketByCreated, bucketRunData,
		bucketLocks, bucketCursors, bucketDedup, bucketDedupExp, bucketSnapshots,
		bucketSources,
	}
)

// DefaultTimeout is how long Open waits for another process to release the
// state file when Options.Timeout is zero.
const DefaultTimeout = time.Second

// Options configure Open.
type Options struct {
	// Timeout bounds the wait for the file lock held by another process
	// (default DefaultTimeout). Open never waits forever.
	Timeout time.Duration
	// ReadOnly opens an existing file with a shared lock; writes fail.
	ReadOnly bool
	// NoSync skips fsync on commit. For tests and benchmarks only: a crash
	// can lose or corrupt committed transactions.
	NoSync bool
	// Now is the clock used for deduplication and for defaults (an event or
	// run without a time). Default time.Now.
	Now func() time.Time
	// Verify runs bbolt's full consistency check on an existing file before
	// using it. It reads every page, so it costs time in proportion to the
	// file; without it, damage deep in the file is reported as
	// state.ErrCorrupt by the first method that reads it.
	Verify bool
}

// Store is a state.Store backed by one bbolt file.
type Store struct {
	db   *bbolt.DB
	path string
	now  func() time.Time
	w    *committer // nil for a read-only store
}

// Open opens the state file at path, creating it (mode 0600, parent
// directory 0700) when it does not exist.
//
// Errors wrap state.ErrLocked when another process holds the file past
// opts.Timeout, and state.ErrCorrupt when the file is not a runbook state
// file or is damaged. A file that fails to open is never modified.
func Open(path string, opts Options) (*Store, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if opts.ReadOnly {
			return nil, fmt.Errorf("open state file %s read-only: %w", path, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create state directory for %s: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	case info.IsDir():
		return nil, fmt.Errorf("open state file %s: is a directory; use --state to pick a file", path)
	case info.Size() > 0:
		// Check an existing file read-only first, so that a damaged or
		// foreign file is refused before bbolt's read-write open (which
		// may write to it) touches it.
		if err := check(path, opts.Timeout, info.Size(), opts.Verify); err != nil {
			return nil, err
		}
	}

	db, err := openDB(path, &bbolt.Options{
		Timeout:         opts.Timeout,
		ReadOnly:        opts.ReadOnly,
		NoSync:          opts.NoSync,
		PreLoadFreelist: opts.ReadOnly,
	})
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, now: opts.Now}
	if !opts.ReadOnly {
		s.w = startCommitter(s, lingerFor)
		if err := s.init(); err != nil {
			s.w.close()
			_ = db.Close()
			return nil, err
		}
	}
	return s, nil
}

// openDB opens path with bbolt, turning a lock timeout into state.ErrLocked
// and invalid files (including panics while reading them) into
// state.ErrCorrupt.
func openDB(path string, o *bbolt.Options) (db *bbolt.DB, err error) {
	var file *os.File
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				_ = file.Close() // releases the lock bbolt took
			}
			db, err = nil, corrupt(path, fmt.Errorf("reading it failed: %v", p))
		}
	}()
	db, err = bbolt.Open(path, 0o600, o)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &lockedError{path: path}
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrInvalidMapping):
		return nil, corrupt(path, err)
	default:
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("open state file: %w", err)
		}
		// bbolt reports short files and unreadable pages with ad hoc
		// errors ("file size too small ...").
		return nil, corrupt(path, err)
	}
}

func corrupt(path string, cause error) error {
	return fmt.Errorf("%w: %s is not a readable runbook state file (%v); it was left untouched: restore it from a backup, or use --state to pick another file", state.ErrCorrupt, path, cause)
}

// check opens an existing non-empty file read-only and verifies that it is
// a complete bbolt file holding a runbook state format this build reads.
func check(path string, timeout time.Duration, size int64, verify bool) (err error) {
	// Not PreLoadFreelist: bbolt would panic on a damaged freelist with
	// the file mapped, and keep it (and its lock); checkFreelist checks it.
	db, err := openDB(path, &bbolt.Options{Timeout: timeout, ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = corrupt(path, fmt.Errorf("reading it failed: %v", p))
		}
	}()
	return db.View(func(tx *bbolt.Tx) error {
		// A file cut short: pages the metadata refers to are missing
		// (reading them would fault).
		if tx.Size() > size {
			return corrupt(path, fmt.Errorf("file is %d bytes, its metadata needs %d: truncated", size, tx.Size()))
		}
		if err := checkFreelist(path, size, db.Info().PageSize, uint64(tx.ID())); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil })
			if empty {
				return nil // created by bbolt, never initialized: Open finishes it
			}
			return corrupt(path, errors.New("a bbolt file without runbook metadata"))
		}
		if err := checkVersion(path, meta.Get(keyFormatVersion)); err != nil {
			return err
		}
		if verify {
			var first error
			for err := range tx.Check() { // drain: the check runs in its own goroutine
				if first == nil {
					first = err
				}
			}
			if first != nil {
				return corrupt(path, first)
			}
		}
		return nil
	})
}

func checkVersion(path string, raw []byte) error {
	if raw == nil {
		return corrupt(path, errors.New("no format version"))
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return corrupt(path, fmt.Errorf("bad format version %q", raw))
	}
	switch {
	case v > state.FormatVersion:
		return fmt.Errorf("state file %s has format version %d, written by a newer runbook; this build reads version %d: upgrade runbook, or use --state to pick another file", path, v, state.FormatVersion)
	case v < state.FormatVersion:
		return fmt.Errorf("state file %s has format version %d, written by a pre-release build of runbook; this build reads version %d and does not upgrade it: "+
			"delete the file (its runs go with it) or read it with the build that wrote it, or use --state to pick another file; it was left untouched", path, v, state.FormatVersion)
	}
	return nil
}

// init creates the buckets and marks the format of a new file (one
// without runbook metadata yet), and checks the format of another (which
// another process may have created since Open looked).
func (s *Store) init() error {
	// Write only to a new file: an Open must not commit to a file it
	// merely reads (a commit rewrites a meta page).
	fresh := false
	err := s.view(context.Background(), func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if fresh = meta == nil; fresh {
			return nil
		}
		return checkVersion(s.path, meta.Get(keyFormatVersion))
	})
	if err != nil || !fresh {
		return err
	}
	return s.update(context.Background(), func(tx *bbolt.Tx) error {
		for _, name := range topBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return tx.Bucket(bucketMeta).Put(keyFormatVersion, []byte(strconv.Itoa(state.FormatVersion)))
	})
}

// Path returns the file the store was opened from.
func (s *Store) Path() string { return s.path }

// Close answers the writes already queued, then releases the file and its
// lock. Calls after (or racing) Close fail; none hangs.
func (s *Store) Close() error {
	if s.w != nil {
		s.w.close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state file %s: %w", s.path, err)
	}
	return nil
}

// update runs fn in a read-write transaction, possibly shared with other
// callers' functions (see committer): fn must be safe to run more than once
// and must reset at its start whatever outer variables it sets. fn's error
// is returned and none of its writes are kept; a panic from bbolt (a
// damaged page found mid-way) rolls back and returns state.ErrCorrupt.
func (s *Store) update(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	return s.write(ctx, fn, false)
}

// updateUrgent is update in the writer's urgent lane: for writes a caller
// outside the process waits on (a webhook sender for its answer).
func (s *Store) updateUrgent(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	return s.write(ctx, fn, true)
}

func (s *Store) write(ctx context.Context, fn func(tx *bbolt.Tx) error, urgent bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.w == nil {
		return fmt.Errorf("state file %s: %w", s.path, berrors.ErrDatabaseReadOnly)
	}
	return s.nameFile(s.w.do(ctx, fn, urgent))
}

// view runs fn in one read-only transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bbolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.recoverCorrupt(&err)
	return s.nameFile(s.db.View(fn))
}

// nameFile adds the file to a corruption found in a record (a value that
// does not decode), as corrupt does for damage bbolt meets.
func (s *Store) nameFile(err error) error {
	if errors.Is(err, state.ErrCorrupt) && !strings.Contains(err.Error(), s.path) {
		return corrupt(s.path, err)
	}
	return err
}

func (s *Store) recoverCorrupt(err *error) {
	if p := recover(); p != nil {
		*err = corrupt(s.path, fmt.Errorf("reading it failed: %v", p))
	}
}

// lockedError is state.ErrLocked naming the file, without repeating
// ErrLocked's own words.
type lockedError struct{ path string }

func (e *lockedError) Error() string {
	return fmt.Sprintf("state file %s is in use by another process (a running \"runbook serve\" or \"runbook run\"?); wait for it, or use --state to pick another file", e.path)
}

func (e *lockedError) Unwrap() error { return state.ErrLocked }
