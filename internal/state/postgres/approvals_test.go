package postgres_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

// Under SERIALIZABLE (a database or DSN may make it the default), answers
// that meet do not only wait on the run's row lock: the one that waited
// is aborted (40001) once the other commits. The store runs it again,
// decide with it, or refuses it as a conflict, so answers given at once
// on two replicas are still each counted or refused, never lost.
func TestAnswersAtOnceUnderSerializableIsolation(t *testing.T) {
	u, err := url.Parse(pgtest.DB(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("default_transaction_isolation", "serializable")
	u.RawQuery = q.Encode()
	a, b := open(t, u.String(), postgres.Options{}), open(t, u.String(), postgres.Options{})
	statetest.RaceAnswers(t, a, b)
	retried := postgres.Retries(a) + postgres.Retries(b)
	t.Logf("transactions aborted and run again: %d", retried)
	require.Positive(t, retried, "no answer met another: the race did not test the retry")
}
