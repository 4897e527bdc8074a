package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// migrationFiles are the schema's versions: NNNN_name.sql, applied in
// order, each once. 0001_baseline creates the tables; each later version
// changes them. A released version is never edited: a change to the schema is a new
// version, with a test that a database of the previous version is
// migrated to it, and only ever additive, so that an older runbook keeps
// working on a schema a newer one has migrated (replicas are upgraded one
// at a time).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one version of the schema.
type Migration struct {
	Version int    // from 1, without gaps
	Name    string // the file name without version and extension
	SQL     string
}

// checksum identifies the text of a migration, recorded when it is
// applied so that a schema applied from another text is refused
// (appliedVersions).
func (m Migration) checksum() string {
	sum := sha256.Sum256([]byte(m.SQL))
	return hex.EncodeToString(sum[:])
}

var migrationName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`) })

// Migrations returns every migration this build knows, in order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName().FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("embedded migration %s: name is not NNNN_name.sql", e.Name())
		}
		data, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read embedded migration %s: %w", e.Name(), err)
		}
		v, _ := strconv.Atoi(m[1])
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(data)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("embedded migrations: version %d where %d belongs (versions run from 1 without gaps)", m.Version, i+1)
		}
	}
	return out, nil
}

// migrationsTable records the applied versions. It is created by the
// migrator itself, not by a migration, so that the first migration is
// recorded like every other.
const migrationsTable = `CREATE TABLE IF NOT EXISTS runbook_schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// migrationLock is the first half of the advisory lock held while
// migrating ("runb"); the second is a hash of the schema the tables go
// in, so that runbook installations in different schemas of one database
// do not wait for each other.
const migrationLock = 0x72756e62

// Pending returns the migrations that the database at dsn lacks, in
// order, without applying them: what "runbook migrate --dry-run" shows.
// A database without runbook's tables lacks them all.
func Pending(ctx context.Context, dsn string) ([]Migration, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, unavailable(cfg, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, conn, all)
	if err != nil {
		return nil, err
	}
	return pending(all, applied), nil
}

// appliedMigration is a version recorded in runbook_schema_migrations.
type appliedMigration struct{ name, checksum string }

// appliedVersions returns each applied version; none when the migrations
// table does not exist yet. A version this build knows that was recorded
// under another name or as another text was applied by a pre-release
// build, whose migrations this build does not continue: it is refused
// (preRelease).
func appliedVersions(ctx context.Context, conn *pgx.Conn, known []Migration) (map[int]appliedMigration, error) {
	var exists bool
	// Both statements go by the simple protocol, one round trip each:
	// the extended protocol's first use of a statement on a connection is
	// two (prepare, then execute), and every command on a database opens
	// the store.
	err := conn.QueryRow(ctx, `SELECT to_regclass('runbook_schema_migrations') IS NOT NULL`,
		pgx.QueryExecModeSimpleProtocol).Scan(&exists)
	if err != nil {
		return nil, fmt.Errorf("look for the migrations table: %w", err)
	}
	out := map[int]appliedMigration{}
	if !exists {
		return out, nil
	}
	rows, err := conn.Query(ctx, `SELECT version, name, checksum FROM runbook_schema_migrations`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	var v int
	var a appliedMigration
	_, err = pgx.ForEachRow(rows, []any{&v, &a.name, &a.checksum}, func() error {
		out[v] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	for _, m := range known {
		a, ok := out[m.Version]
		switch {
		case !ok:
		case a.name != m.Name:
			return nil, preRelease(fmt.Sprintf("its migration %04d is %q, this build's is %q", m.Version, a.name, m.Name))
		case a.checksum != m.checksum():
			// A build before the baseline last changed, whose schema may
			// lack a column this build's queries use: a released migration
			// is never edited.
			return nil, preRelease(fmt.Sprintf("its migration %04d %q was applied as another text than this build's", m.Version, m.Name))
		}
	}
	return out, nil
}

// preRelease is the refusal of a schema made by a pre-release build of
// runbook, which is why (how its migrations differ from this build's).
func preRelease(why string) error {
	return fmt.Errorf("the runbook tables in this schema were made by a pre-release build of runbook "+
		"(%s), whose schema this build does not upgrade: "+
		"point --state at a new database or schema (search_path in the URL), or keep using the build that made it", why)
}

// migrate applies the pending migrations, each in its own transaction,
// under a session advisory lock: replicas opening the store at once wait
// for each other, and each migration is applied once. The lock goes with
// the connection if the process dies mid-way; a migration that failed is
// rolled back whole and tried again by the next Open. Most opens find
// every migration applied: they read that without the lock, which only
// applying one needs (a migration commits with its record), and write
// nothing.
func migrate(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	all, err := Migrations()
	if err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, conn, all)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(pending(all, applied)) > 0 {
		if applied, err = applyPending(ctx, conn, all, log); err != nil {
			return err
		}
	}
	for v := range applied {
		if !slices.ContainsFunc(all, func(m Migration) bool { return m.Version == v }) {
			// Migrations are additive: this build's queries still hold.
			log.Info("state schema has a migration this build does not know (a newer runbook applied it)", "version", v)
		}
	}
	return nil
}

// pending returns the migrations of all that applied lacks, in order.
func pending(all []Migration, applied map[int]appliedMigration) []Migration {
	var out []Migration
	for _, m := range all {
		if _, ok := applied[m.Version]; !ok {
			out = append(out, m)
		}
	}
	return out
}

// applyPending takes the migration lock, reads the applied versions again
// (another process may have applied them meanwhile), applies what is
// still pending and returns the versions applied now.
func applyPending(ctx context.Context, conn *pgx.Conn, all []Migration, log *slog.Logger) (map[int]appliedMigration, error) {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, migrationLock); err != nil {
		return nil, fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	defer func() {
		// On a cancelled ctx the unlock still runs; if it fails, the
		// connection is closed (which releases the lock) rather than
		// returned to the pool holding it.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockReleaseTimeout)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, migrationLock); err != nil {
			_ = conn.Close(uctx)
		}
	}()
	if _, err := conn.Exec(ctx, migrationsTable); err != nil {
		return nil, fmt.Errorf("migrate: create runbook_schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, conn, all)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	for _, m := range pending(all, applied) {
		if err := apply(ctx, conn, m); err != nil {
			return nil, err
		}
		applied[m.Version] = appliedMigration{name: m.Name, checksum: m.checksum()}
		log.Info("state migration applied", "version", m.Version, "name", m.Name)
	}
	return applied, nil
}

// apply runs one migration and records it, in one transaction.
func apply(ctx context.Context, conn *pgx.Conn, m Migration) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO runbook_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)`,
			m.Version, m.Name, m.checksum())
		return err
	})
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Position > 0 {
			return fmt.Errorf("migration %04d_%s: at character %d: %w", m.Version, m.Name, pe.Position, err)
		}
		return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return nil
}
