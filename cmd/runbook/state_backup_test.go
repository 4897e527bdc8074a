package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// hooksIn returns the hook IDs of the runs a state file holds (a run's key
// is "<playbook>/<trigger>/id:<hookId>"), and logs how many are unfinished.
func hooksIn(t *testing.T, file string) map[string]int {
	t.Helper()
	st, err := bolt.Open(file, bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.ListRuns(context.Background(), state.RunFilter{})
	require.NoError(t, err)
	out, unfinished := map[string]int{}, 0
	for _, r := range runs {
		if !r.Status.Done() {
			unfinished++
		}
		key, _ := r.Trigger["key"].(string)
		_, hookID, _ := strings.Cut(key, "/id:")
		out[hookID]++
	}
	t.Logf("%s: %d runs, %d unfinished", filepath.Base(file), len(runs), unfinished)
	return out
}

// A backup taken through runbook serve while webhooks arrive holds every
// run of every delivery acknowledged before the backup started, and opens
// as a state file; the server goes on taking deliveries meanwhile.
func TestStateBackupWhileServeTakesWebhooks(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	src, err := os.ReadFile(filepath.Join("..", "..", "playbooks", "sms-unsubscribe.yaml"))
	require.NoError(t, err)
	c.file("playbooks/sms-unsubscribe.yaml", string(src))
	c.file("runbook.yaml", "webhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n")
	c.env = append(c.env, "SMS_WEBHOOK_SECRET=hook-secret", "SMS_SUPPRESSION_FILE="+filepath.Join(c.dir, "suppression.txt"), "RUNBOOK_FILE_ROOTS="+c.dir)
	s := c.serve()

	deliveries := makeDeliveries(600)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var mu sync.Mutex
	acked := map[string]bool{}
	next := make(chan delivery)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for d := range next {
				if s.post(client, d, "hook-secret")/100 == 2 {
					mu.Lock()
					acked[d.id] = true
					mu.Unlock()
				}
			}
		})
	}
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		for _, d := range deliveries {
			next <- d
		}
		close(next)
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	require.Eventually(t, func() bool { return ackedCount() >= 100 }, 60*time.Second, 10*time.Millisecond)

	mu.Lock()
	before := make(map[string]bool, len(acked))
	for id := range acked {
		before[id] = true
	}
	mu.Unlock()
	dest := filepath.Join(c.dir, "backups", "state.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(dest), 0o700))
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+serveToken)
	r := c.run("state", "backup", dest)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "through runbook serve")
	duringBackup := ackedCount()
	<-sending
	wg.Wait()
	t.Logf("%d deliveries acknowledged when the backup started, %d when it ended, %d in all; %s", len(before), duringBackup, ackedCount(), strings.TrimSpace(r.stdout))
	require.Greater(t, ackedCount(), len(before), "deliveries went on being acknowledged after the backup started")

	fi, err := os.Stat(dest)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	leftovers, _ := filepath.Glob(dest + ".tmp-*")
	assert.Empty(t, leftovers)
	inCopy := hooksIn(t, dest)
	missing := 0
	for _, d := range deliveries {
		if !before[d.id] {
			continue
		}
		for _, h := range d.hooks {
			if inCopy[h] != 1 {
				missing++
				t.Errorf("hook %s of delivery %s, acknowledged before the backup, has %d runs in the copy", h, d.id, inCopy[h])
			}
		}
	}
	assert.Zero(t, missing)
	s.stop(t)

	// Restored: a server started on the copy executes to their end the
	// runs that were unfinished in it.
	for i, e := range c.env {
		if strings.HasPrefix(e, "RUNBOOK_STATE=") {
			c.env[i] = "RUNBOOK_STATE=" + dest
		}
	}
	restored := c.serve()
	total := 0
	for _, n := range inCopy {
		total += n
	}
	require.Eventually(t, func() bool {
		_, m := restored.api(t, "GET", "/api/v1/runs?limit=10000", nil)
		runs := m["runs"].([]any)
		for _, r := range runs {
			if r.(map[string]any)["status"] != "succeeded" {
				return false
			}
		}
		return len(runs) == total
	}, 60*time.Second, 100*time.Millisecond, "the restored server ends the copy's %d runs", total)
	restored.stop(t)
}

// Without a process holding it the file is copied directly, and a copy
// that fails leaves the previous backup as it was; a PostgreSQL state is
// refused with the pg_dump command.
func TestStateBackupDirectlyAndOnPostgreSQL(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	pb := c.file("hello.yaml", "version: 1\nname: hello\nsteps:\n  - {id: a, uses: log, with: {message: hi}}\n")
	for range 3 {
		require.Equal(t, 0, c.run("run", pb).code)
	}
	dest := filepath.Join(c.dir, "copy.db")
	r := c.run("state", "backup", dest)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "directly: 3 runs")
	assert.Len(t, hooksIn(t, dest), 1) // three runs without a hook

	r = c.run("state", "backup", c.state)
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "FILE is the state file itself")

	r = c.run("state", "backup", dest, "--state", "postgres://ops@db.example:5432/runbook")
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "pg_dump --format=custom --file="+dest)
}

// The runbook run holding the state file (waiting for an approval) copies
// it through its socket: the copy holds the waiting run, and the run goes
// on when approved.
func TestStateBackupThroughTheSocketOfARunningRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	b := c.startWaiting(t, c.file("gated.yaml", approvalPlaybook))
	dest := filepath.Join(c.dir, "copy.db")
	r := c.run("state", "backup", dest)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "through runbook run (pid")
	assert.Contains(t, r.stdout, ": 1 runs")
	st, err := bolt.Open(dest, bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	run, err := st.GetRun(context.Background(), b.id)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, run.Status)
	require.NoError(t, st.Close())

	r = c.run("runs", "approve", b.id, "gate", "--field", "ticket=42")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Equal(t, 0, b.exit(t), "%s", b.out)
}

// The PostgreSQL backup docs/operations.md gives works: pg_dump of the
// state's schema, the schema lost, pg_restore of the dump, and the runs
// are back for runbook.
func TestPgDumpAndPgRestoreBringThePostgreSQLStateBack(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dsn := onDatabase(t, c)
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	if len(bins) == 0 {
		t.Skip("no pg_dump in /usr/lib/postgresql/*/bin (Debian's postgresql)")
	}
	slices.Sort(bins)
	pgbin := filepath.Dir(bins[len(bins)-1])
	pb := c.file("hello.yaml", "version: 1\nname: hello\nsteps:\n  - {id: a, uses: log, with: {message: hi}}\n")
	for range 3 {
		require.Equal(t, 0, c.run("run", pb).code)
	}
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	schema := q.Get("search_path")
	require.NotEmpty(t, schema)
	q.Del("search_path")
	u.RawQuery = q.Encode()
	dump := filepath.Join(c.dir, "runbook.dump")
	out, err := exec.Command(filepath.Join(pgbin, "pg_dump"), "--format=custom", "--schema="+schema, "--file="+dump, u.String()).CombinedOutput()
	require.NoError(t, err, "%s", out)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	out, err = exec.Command(filepath.Join(pgbin, "pg_restore"), "--no-owner", "--dbname="+u.String(), dump).CombinedOutput()
	require.NoError(t, err, "%s", out)
	r := c.run("runs", "list")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Equal(t, 3, strings.Count(r.stdout, "succeeded"), "%s", r.stdout)
}

// cutAfter is a TCP proxy on loopback to addr that passes the first n
// bytes of each answer and then cuts the connection.
func cutAfter(t *testing.T, addr string, n int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer client.Close()
				srv, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer srv.Close()
				go func() { _, _ = io.Copy(srv, client) }()
				_, _ = io.CopyN(client, srv, n)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A copy cut short on its way is refused: the previous backup stays as it
// was and nothing is left beside it.
func TestStateBackupCutShortKeepsThePreviousOne(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/hello.yaml", "version: 1\nname: hello\nsteps:\n  - {id: a, uses: log, with: {message: hi}}\n")
	s := c.serve()
	for range 3 {
		code, _ := s.api(t, "POST", "/api/v1/playbooks/hello/runs", map[string]any{})
		require.Equal(t, http.StatusCreated, code)
	}
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+serveToken)
	dest := filepath.Join(c.dir, "backup.db")
	r := c.run("state", "backup", dest)
	require.Equal(t, 0, r.code, "%s", r)
	before, err := os.ReadFile(dest)
	require.NoError(t, err)

	r = c.run("state", "backup", dest, "--server", cutAfter(t, strings.TrimPrefix(s.url, "http://"), 20000))
	assert.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "back up:")
	after, err := os.ReadFile(dest)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the previous backup is kept")
	leftovers, _ := filepath.Glob(dest + ".tmp-*")
	assert.Empty(t, leftovers)
	s.stop(t)
}
