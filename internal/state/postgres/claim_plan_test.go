package postgres_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// A claim of one run keeps the generic plan PostgreSQL makes of its
// prepared statement (as the pool's statement cache prepares it) instead
// of planning it again at every call: pg_prepared_statements counts the
// plans of each kind. The array form of the statement, for several runs,
// was planned at every call.
func TestAClaimOfOneRunIsNotPlannedAtEveryCall(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	const calls = 12
	for i := range calls {
		require.NoError(t, s.CreateRun(ctx, &state.Run{ID: fmt.Sprint("r", i), Playbook: "pb", Status: state.RunPending}))
	}
	conn := connect(t, dsn)
	for _, adopt := range []bool{false, true} {
		name := fmt.Sprint("claim_", adopt)
		_, err := conn.Exec(ctx, `PREPARE `+name+` (text, text) AS `+postgres.ClaimRuns(adopt, true))
		require.NoError(t, err)
		for i := range calls {
			_, err := conn.Exec(ctx, fmt.Sprintf(`EXECUTE %s('replica-a', 'r%d')`, name, i))
			require.NoError(t, err)
		}
		var generic, custom int
		require.NoError(t, conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, name).
			Scan(&generic, &custom))
		assert.LessOrEqual(t, custom, 5, "adopt=%v: custom plans (the first five are)", adopt)
		assert.GreaterOrEqual(t, generic, calls-5, "adopt=%v: generic plans", adopt)
	}
}
