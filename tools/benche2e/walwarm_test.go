package benche2e

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// After WarmWAL, the WAL a load writes goes into segment files that are
// there already: the server creates none while it commits.
func TestWarmWALLeavesSegmentsReadyAhead(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	before, err := walAhead(ctx, conn)
	require.NoError(t, err)

	want := before + 64<<20 // more than there is: a no-op cannot pass
	ahead, err := WarmWAL(ctx, dsn, want)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ahead, want)
	var files, segments int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE name > pg_walfile_name(pg_current_wal_insert_lsn()))
		FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'`).Scan(&files, &segments))
	assert.GreaterOrEqual(t, int64(segments)*walSegment, want, "segment files past the one being written")

	// Three segments' worth of WAL moves into files that exist.
	require.NoError(t, writeWAL(ctx, conn, 3*walSegment))
	var after int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'`).Scan(&after))
	assert.Equal(t, files, after, "WAL segment files before and after 48 MiB of WAL")
}
