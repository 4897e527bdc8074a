package postgres_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestScheduleContract(t *testing.T) {
	statetest.RunSchedules(t, func(t *testing.T) state.ScheduleStore {
		return open(t, pgtest.DB(t), postgres.Options{})
	})
}

func TestRunPauseContract(t *testing.T) {
	statetest.RunRunPauses(t, func(t *testing.T) state.RunPauseStore {
		return open(t, pgtest.DB(t), postgres.Options{})
	})
}
