package benche2e

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// walSegment is the size of a WAL segment file of a cluster initialised
// with initdb's default (16 MiB); walAhead reads the server's own.
const walSegment = 16 << 20

// WarmWAL leaves at least want bytes of WAL segment files ready ahead of
// the server's insert position at dsn, and returns how many bytes are.
//
// A new cluster has no spare segment: each 16 MiB of WAL a load writes
// makes the server create the next file and fill it with zeros (and sync
// it) first, and every commit waits meanwhile. On this machine that was a
// stall of 60 to 75 ms every 16 MiB, about once a second under the `log`
// load (docs/performance.md). A server that has been through a checkpoint
// renames the segments the checkpoint made obsolete instead, as far ahead
// as its recent WAL says it needs: a server in service has them. So
// WarmWAL checkpoints (which recycles what earlier loads wrote), and when
// that leaves too few, writes WAL in a table of its own, drops it and
// checkpoints again.
//
// It needs a role that may checkpoint and list the WAL directory (a
// superuser; pgtest's is one) and writes only to its own table in the
// schema dsn's search_path names.
func WarmWAL(ctx context.Context, dsn string, want int64) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	ahead, err := walAhead(ctx, conn)
	if err != nil || ahead >= want {
		return ahead, err
	}
	// A checkpoint recycles the segments earlier loads filled.
	if err := checkpoint(ctx, conn); err != nil {
		return ahead, err
	}
	if ahead, err = walAhead(ctx, conn); err != nil || ahead >= want {
		return ahead, err
	}
	if err := writeWAL(ctx, conn, want-ahead+walSegment); err != nil {
		return ahead, err
	}
	if err := checkpoint(ctx, conn); err != nil {
		return ahead, err
	}
	if ahead, err = walAhead(ctx, conn); err == nil && ahead < want {
		err = fmt.Errorf("only %d MiB of WAL segments ahead after writing %d MiB and a checkpoint", ahead>>20, want>>20)
	}
	return ahead, err
}

func checkpoint(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// walAhead is the size of the WAL segment files past the one being
// written: the ones a commit can move into without creating a file.
func walAhead(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var ahead int64
	err := conn.QueryRow(ctx, `SELECT coalesce(sum(size), 0)::bigint FROM pg_ls_waldir()
		WHERE name ~ '^[0-9A-F]{24}$' AND name > pg_walfile_name(pg_current_wal_insert_lsn())`).Scan(&ahead)
	if err != nil {
		return 0, fmt.Errorf("list the WAL segments: %w", err)
	}
	return ahead, nil
}

// writeWAL writes at least n bytes of WAL: rows of 1,000 bytes into a
// table of its own, dropped after.
func writeWAL(ctx context.Context, conn *pgx.Conn, n int64) error {
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS runbook_bench_walwarm (b bytea)"); err != nil {
		return fmt.Errorf("write WAL: %w", err)
	}
	defer conn.Exec(ctx, "DROP TABLE IF EXISTS runbook_bench_walwarm") //nolint:errcheck // best effort; the schema goes with the test
	var start string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&start); err != nil {
		return fmt.Errorf("write WAL: %w", err)
	}
	for {
		var written int64
		err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint", start).Scan(&written)
		if err != nil {
			return fmt.Errorf("write WAL: %w", err)
		}
		if written >= n {
			return nil
		}
		rows := min((n-written)/1000+1, 65536)
		if _, err := conn.Exec(ctx, `INSERT INTO runbook_bench_walwarm
			SELECT decode(repeat(md5(i::text), 62) || '0123456789abcdef', 'hex') FROM generate_series(1, $1::bigint) AS i`, rows); err != nil {
			return fmt.Errorf("write WAL: %w", err)
		}
	}
}
