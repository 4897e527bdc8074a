package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// logBuffer is a slog destination safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// connect opens a plain connection to dsn, closed when t ends.
func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// applied returns the versions recorded in runbook_schema_migrations.
func applied(t *testing.T, dsn string) []int {
	t.Helper()
	rows, err := connect(t, dsn).Query(ctx, `SELECT version FROM runbook_schema_migrations ORDER BY version`)
	require.NoError(t, err)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return versions
}

func allVersions(t *testing.T) []int {
	t.Helper()
	all, err := postgres.Migrations()
	require.NoError(t, err)
	var out []int
	for _, m := range all {
		out = append(out, m.Version)
	}
	return out
}

func TestANewDatabaseGetsEveryMigrationOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	var logs logBuffer
	open(t, dsn, postgres.Options{Logger: logs.logger()})
	assert.Equal(t, allVersions(t), applied(t, dsn))
	assert.Equal(t, len(allVersions(t)), strings.Count(logs.String(), "state migration applied"), logs.String())
	pending, err := postgres.Pending(ctx, dsn)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

func TestReopeningAppliesNothing(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}))
	require.NoError(t, s.Close())

	var logs logBuffer
	again := open(t, dsn, postgres.Options{Logger: logs.logger()})
	assert.NotContains(t, logs.String(), "state migration applied")
	assert.Equal(t, allVersions(t), applied(t, dsn))
	_, err := again.GetRun(ctx, "r1")
	assert.NoError(t, err, "a reopened store keeps what was written")
}

func TestReplicasOpeningAtOnceApplyEachMigrationOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	const replicas = 4
	logs := make([]logBuffer, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range replicas {
		wg.Go(func() {
			<-start
			s, err := postgres.Open(ctx, dsn, postgres.Options{Logger: logs[i].logger()})
			errs[i] = err
			if err == nil {
				t.Cleanup(func() { _ = s.Close() })
			}
		})
	}
	close(start)
	wg.Wait()
	total := 0
	for i := range replicas {
		require.NoError(t, errs[i], "replica %d", i)
		total += strings.Count(logs[i].String(), "state migration applied")
	}
	assert.Equal(t, len(allVersions(t)), total, "migrations applied across the replicas")
	assert.Equal(t, allVersions(t), applied(t, dsn))
}

func TestOpenLeavesNoAdvisoryLockHeld(t *testing.T) {
	dsn := pgtest.DB(t)
	open(t, dsn, postgres.Options{})
	var held int
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'`).Scan(&held))
	assert.Zero(t, held)
}

// The migration lock is taken to apply a migration only: a schema with
// every migration applied opens while another process holds the lock (a
// newer build applying its own), and one that lacks a migration waits.
func TestOnlyApplyingAMigrationWaitsForTheMigrationLock(t *testing.T) {
	lacking, current := pgtest.DB(t), pgtest.DB(t)
	open(t, current, postgres.Options{})
	for _, dsn := range []string{lacking, current} {
		_, err := connect(t, dsn).Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, postgres.MigrationLock)
		require.NoError(t, err)
	}

	s, err := postgres.Open(ctx, current, postgres.Options{Timeout: 2 * time.Second})
	require.NoError(t, err, "an up-to-date schema opens under another's migration lock")
	require.NoError(t, s.Close())

	_, err = postgres.Open(ctx, lacking, postgres.Options{Timeout: 500 * time.Millisecond})
	require.Error(t, err, "a schema lacking migrations waits for the lock")
	assert.Contains(t, err.Error(), "take the migration lock")
	var table *string
	require.NoError(t, connect(t, lacking).QueryRow(ctx, `SELECT to_regclass('runbook_schema_migrations')::text`).Scan(&table))
	assert.Nil(t, table, "nothing was written without the lock")
}

func TestPendingListsWhatADatabaseLacks(t *testing.T) {
	dsn := pgtest.DB(t)
	pending, err := postgres.Pending(ctx, dsn)
	require.NoError(t, err)
	all, err := postgres.Migrations()
	require.NoError(t, err)
	assert.Equal(t, all, pending, "an empty database lacks every migration")
	require.NotEmpty(t, pending)
	assert.Contains(t, pending[0].SQL, "CREATE TABLE runbook_runs")

	var tables int
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables))
	assert.Zero(t, tables, "Pending created nothing")
}

func TestAVersionThisBuildDoesNotKnowIsLoggedNotRefused(t *testing.T) {
	dsn := pgtest.DB(t)
	require.NoError(t, open(t, dsn, postgres.Options{}).Close())
	_, err := connect(t, dsn).Exec(ctx, `INSERT INTO runbook_schema_migrations (version, name, checksum) VALUES (9999, 'from_the_future', 'x')`)
	require.NoError(t, err)

	var logs logBuffer
	s := open(t, dsn, postgres.Options{Logger: logs.logger()})
	assert.Contains(t, logs.String(), "version=9999")
	assert.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}))
}

// A schema whose baseline was applied as another text (a database of a
// build before the baseline last changed: 25e7a75 added a column the
// concurrency keys need) is refused at Open and by Pending, saying what to
// do, instead of failing later on the missing column.
func TestASchemaOfAnEditedBaselineIsRefused(t *testing.T) {
	dsn := pgtest.DB(t)
	require.NoError(t, open(t, dsn, postgres.Options{}).Close())
	_, err := connect(t, dsn).Exec(ctx, `UPDATE runbook_schema_migrations SET checksum = 'edited' WHERE version = 1`)
	require.NoError(t, err)

	_, err = postgres.Open(ctx, dsn, postgres.Options{Timeout: 10 * time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "made by a pre-release build of runbook")
	assert.Contains(t, err.Error(), `its migration 0001 "baseline" was applied as another text than this build's`)
	assert.Contains(t, err.Error(), "point --state at a new database or schema")
	_, err = postgres.Pending(ctx, dsn)
	assert.ErrorContains(t, err, "made by a pre-release build of runbook")
}

// A pre-release build recorded its own numbered migrations (0001_initial
// to 0009_key_notice); this build neither upgrades nor adds to such a
// schema: Open and Pending refuse it, say why and what to do, and leave
// it as it was.
func TestASchemaOfAPreReleaseBuildIsRefused(t *testing.T) {
	dsn := pgtest.DB(t)
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `CREATE TABLE runbook_schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now());
	CREATE TABLE runbook_runs (id text PRIMARY KEY, record json NOT NULL);
	INSERT INTO runbook_schema_migrations (version, name, checksum) VALUES
		(1, 'initial', 'a'), (2, 'deliveries', 'b'), (3, 'auth', 'c'), (4, 'sessions', 'd'), (5, 'step_output', 'e'),
		(6, 'replicas', 'f'), (7, 'fence', 'g'), (8, 'unfinished_by_playbook', 'h'), (9, 'key_notice', 'i')`)
	require.NoError(t, err)

	_, err = postgres.Open(ctx, dsn, postgres.Options{Timeout: 10 * time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "made by a pre-release build of runbook")
	assert.Contains(t, err.Error(), `its migration 0001 is "initial", this build's is "baseline"`)
	assert.Contains(t, err.Error(), "point --state at a new database or schema")

	_, err = postgres.Pending(ctx, dsn)
	assert.ErrorContains(t, err, "made by a pre-release build of runbook")

	var tables int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables))
	assert.Equal(t, 2, tables, "the refused schema gained no table")
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, applied(t, dsn), "and no recorded migration")
}

// A migration that fails is rolled back whole and the next Open tries it
// again: here a table of the first migration is in the way, then gone.
func TestAFailedMigrationIsRolledBackAndRetried(t *testing.T) {
	dsn := pgtest.DB(t)
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `CREATE TABLE runbook_locks (x int)`)
	require.NoError(t, err)

	_, err = postgres.Open(ctx, dsn, postgres.Options{Timeout: 10 * time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0001_baseline")
	var runs *string
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass('runbook_runs')::text`).Scan(&runs))
	assert.Nil(t, runs, "the failed migration's first table was rolled back")
	assert.Empty(t, applied(t, dsn))

	_, err = conn.Exec(ctx, `DROP TABLE runbook_locks`)
	require.NoError(t, err)
	open(t, dsn, postgres.Options{})
	assert.Equal(t, allVersions(t), applied(t, dsn))
}

// destructive matches statements that would break a replica of the
// previous release still running on the migrated schema.
var destructive = []struct {
	why string
	re  *regexp.Regexp
}{
	{"drops", regexp.MustCompile(`(?i)\bDROP\b`)},
	{"truncates", regexp.MustCompile(`(?i)\bTRUNCATE\b`)},
	{"deletes rows", regexp.MustCompile(`(?i)\bDELETE\s+FROM\b`)},
	{"renames", regexp.MustCompile(`(?i)\bRENAME\b`)},
	{"changes a column's type", regexp.MustCompile(`(?i)\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`)},
	{"makes a column required", regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`)},
}

// reviewedDrops are the destructive statements a replica of the previous
// release survives, each with why.
var reviewedDrops = map[string]string{
	"ALTER TABLE runbook_events DROP CONSTRAINT runbook_events_run_id_fkey": "every statement of the previous release " +
		"that inserts events writes their run in the same statement first, so the key never refused one of its writes; " +
		"the migration's trigger deletes a run's events as the key's cascade did",
}

var (
	sqlComment = regexp.MustCompile(`--[^\n]*`)
	// functionBody is a dollar-quoted body: it runs when it is called, not
	// when the migration creates it.
	functionBody = regexp.MustCompile(`(?s)\$\$.*?\$\$`)
	addColumn    = regexp.MustCompile(`(?i)\bADD\s+COLUMN\b`)
	notNull      = regexp.MustCompile(`(?i)\bNOT\s+NULL\b`)
	hasDefault   = regexp.MustCompile(`(?i)\bDEFAULT\b`)
)

// destructiveReason says why a migration's SQL would break the previous
// release, or "" when it only adds.
func destructiveReason(sql string) string {
	sql = functionBody.ReplaceAllString(sqlComment.ReplaceAllString(sql, ""), "$$$$")
	for _, stmt := range strings.Split(sql, ";") {
		if _, ok := reviewedDrops[strings.Join(strings.Fields(stmt), " ")]; ok {
			continue
		}
		for _, d := range destructive {
			if m := d.re.FindString(stmt); m != "" {
				return fmt.Sprintf("%s (%q)", d.why, strings.TrimSpace(stmt))
			}
		}
		// The previous release inserts rows without the new column.
		if addColumn.MatchString(stmt) && notNull.MatchString(stmt) && !hasDefault.MatchString(stmt) {
			return fmt.Sprintf("adds a required column without a default (%q)", strings.TrimSpace(stmt))
		}
	}
	return ""
}

func TestMigrationsAreAdditiveOnly(t *testing.T) {
	all, err := postgres.Migrations()
	require.NoError(t, err)
	for _, m := range all {
		if why := destructiveReason(m.SQL); why != "" {
			t.Errorf("migration %04d_%s %s: a replica of the previous release would break; add instead", m.Version, m.Name, why)
		}
	}
}

func TestTheAdditiveCheckCatchesDestructiveStatements(t *testing.T) {
	for _, sql := range []string{
		"DROP TABLE runbook_runs;",
		"ALTER TABLE runbook_runs DROP COLUMN owner;",
		"ALTER TABLE runbook_runs RENAME COLUMN owner TO holder;",
		"ALTER TABLE runbook_runs ALTER COLUMN owner TYPE int;",
		"ALTER TABLE runbook_runs ALTER COLUMN owner SET NOT NULL;",
		"ALTER TABLE runbook_runs ADD COLUMN lease text NOT NULL;",
		"CREATE INDEX a ON runbook_runs (owner);\nTRUNCATE runbook_dedup;",
		"DELETE FROM runbook_dedup;",
		"ALTER TABLE runbook_steps DROP CONSTRAINT runbook_steps_run_id_fkey;",
	} {
		assert.NotEmpty(t, destructiveReason(sql), "not caught: %s", sql)
	}
	for _, sql := range []string{
		"ALTER TABLE runbook_runs ADD COLUMN lease text NOT NULL DEFAULT '';",
		"ALTER TABLE runbook_runs ADD COLUMN lease_until timestamptz;\n-- never DROP anything",
		"CREATE INDEX runbook_runs_owner ON runbook_runs (owner) WHERE owner IS NOT NULL;",
		"CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n    DELETE FROM runbook_events;\n    RETURN NULL;\nEND\n$$;",
	} {
		assert.Empty(t, destructiveReason(sql))
	}
}
