package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// cmdStateBackup copies a bbolt state file while a runbook process may
// hold it: through that process (runbook serve's API, a runbook run's
// socket), which copies it from one read transaction, or directly when
// no process holds it. The copy is written beside FILE, synced, opened
// and its runs counted, and only then renamed to FILE.
func cmdStateBackup(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:  "state backup",
		usage: "FILE [--state PATH]",
		summary: "Copy the state file to FILE, consistent as of one moment, while runbook serve or runbook run " +
			"holds it (through that process) or not (directly). The copy is verified (opened, its runs counted) " +
			"before it replaces FILE, written with mode 0600 and synced to disk.",
		details: "A PostgreSQL state is backed up with pg_dump; this command prints how. Restore a copy by " +
			"stopping runbook and putting the copy in place of the state file (docs/operations.md).",
	})
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 1, "FILE")
	if err != nil {
		return err
	}
	dest := pos[0]
	path, err := o.sf.statePath()
	if err != nil {
		return err
	}
	if isDSN(path) {
		return &exitError{code: 2,
			err: fmt.Errorf("the state is a PostgreSQL database (%s): runbook state backup copies a bbolt file", displayLocation(path)),
			hint: "back the database up with pg_dump, which takes a consistent snapshot while the replicas run:\n" +
				"  pg_dump --format=custom --file=" + dest + " 'postgres://USER@HOST:5432/DB'\n" +
				"and restore it with pg_restore (docs/operations.md)"}
	}
	if sameLocation(path, dest) {
		return usageErrorf("state backup", "FILE is the state file itself (%s)", path)
	}
	if _, err := os.Stat(path); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("state file %s: %w", path, err), hint: "name the state file with --state PATH"}
	}
	b := &backup{dest: dest, tmp: fmt.Sprintf("%s.tmp-%d", dest, os.Getpid())}
	via, err := b.take(ctx, o, path)
	if err != nil {
		_ = os.Remove(b.tmp)
		return err
	}
	runs, err := b.verify(ctx)
	if err != nil {
		_ = os.Remove(b.tmp)
		return &exitError{code: 1, err: fmt.Errorf("the copy does not open as a state file: %w", err), hint: "take the backup again; " + dest + " was left as it was"}
	}
	if err := b.keep(); err != nil {
		_ = os.Remove(b.tmp)
		return &exitError{code: 1, err: err, hint: "check the directory of " + dest}
	}
	fmt.Fprintf(a.stdout, "Backed up %s to %s %s: %d runs, %d bytes.\n", path, dest, via, runs, b.size)
	return nil
}

// backup is one copy being taken: written to tmp, renamed to dest once
// verified.
type backup struct {
	dest, tmp string
	size      int64
}

// take copies the state file at path into b.tmp: directly when no process
// holds it, else through the runbook serve or runbook run that does (or
// the server --server names). It returns how ("directly", "through …").
func (b *backup) take(ctx context.Context, o *runsOpener, path string) (string, error) {
	if u := cmp.Or(o.srv.url, os.Getenv("RUNBOOK_SERVER")); u != "" {
		api, err := o.api(strings.TrimRight(u, "/"))
		if err != nil {
			return "", err
		}
		return "through " + api.name(), b.write(func(f *os.File) (int64, error) { return api.backup(ctx, f, &b.size) })
	}
	disc, hasDisc := readDiscovery(path)
	holder, hasHolder := server.ReadHolder(path)
	hasHolder = hasHolder && alive(holder.PID)
	timeout := lockTimeout
	if hasDisc || hasHolder {
		timeout = 50 * time.Millisecond
	}
	st, err := bolt.Open(path, bolt.Options{ReadOnly: true, Timeout: timeout})
	if err == nil {
		defer st.Close()
		return "directly", b.write(func(f *os.File) (int64, error) {
			return st.Backup(ctx, func(size int64) io.Writer { b.size = size; return f })
		})
	}
	if !errors.Is(err, state.ErrLocked) {
		return "", storeError(err)
	}
	var api *apiBackend
	switch {
	case hasDisc && healthy(ctx, disc.URL):
		if api, err = o.api(disc.URL); err != nil {
			return "", err
		}
	case hasHolder:
		var ok bool
		if api, ok = localBackend(ctx, path, holder); !ok {
			return "", &exitError{code: 1, err: err, hint: fmt.Sprintf("runbook run (pid %d) holds the file and its socket does not answer; back up when it ends", holder.PID)}
		}
	default:
		return "", heldError(path, err)
	}
	return "through " + api.name(), b.write(func(f *os.File) (int64, error) { return api.backup(ctx, f, &b.size) })
}

// write creates b.tmp (mode 0600, never an existing file), fills it with
// copy, checks that it holds b.size bytes and syncs it.
func (b *backup) write(copy func(*os.File) (int64, error)) error {
	f, err := os.OpenFile(b.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &exitError{code: 1, err: err, hint: "check the directory of " + b.dest}
	}
	n, err := copy(f)
	if err == nil && n != b.size {
		err = fmt.Errorf("the copy ended after %d of %d bytes", n, b.size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("back up: %w", err), hint: b.dest + " was left as it was; take the backup again"}
	}
	return nil
}

// verify opens the copy read-only and counts its runs.
func (b *backup) verify(ctx context.Context) (int, error) {
	st, err := bolt.Open(b.tmp, bolt.Options{ReadOnly: true, Timeout: lockTimeout, Verify: true})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	runs, err := st.ListRuns(ctx, state.RunFilter{})
	return len(runs), err
}

// keep renames the verified copy to dest and syncs the directory, so the
// rename survives a crash.
func (b *backup) keep() error {
	if err := os.Rename(b.tmp, b.dest); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(b.dest))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// backup copies the state file the process at the other end holds into w
// (GET /api/v1/state/backup) and sets *size to the length it announced.
func (b *apiBackend) backup(ctx context.Context, w io.Writer, size *int64) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/api/v1/state/backup", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", b.name(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, b.answerError(resp)
	}
	if *size, err = strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err != nil {
		return 0, fmt.Errorf("%s sent the copy without its length", b.name())
	}
	return io.Copy(w, resp.Body)
}
