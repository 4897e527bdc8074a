package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// staleRead is a PostgreSQL store whose first read of run stale answers
// it as it was before it ended: a cancel that read the run just before
// another replica recorded its end.
type staleRead struct {
	*postgres.Store
	stale string
	read  atomic.Bool
}

func (s *staleRead) GetRun(ctx context.Context, id string) (*state.Run, error) {
	r, err := s.Store.GetRun(ctx, id)
	if err == nil && id == s.stale && !s.read.Swap(true) {
		r.Status, r.EndedAt = state.RunRunning, time.Time{}
	}
	return r, err
}

// A cancel through the API of a run that ended on another replica after
// the cancel read it answers 409 naming the end, and the run keeps it.
func TestACancelRacingARunsEndOnAnotherReplicaIsRefused(t *testing.T) {
	pg := openPG(t, pgtest.DB(t))
	now := time.Now()
	run := &state.Run{ID: "20261127T000000-aaaaaa", Playbook: "gate", Status: state.RunRunning, Owner: "elsewhere/1", CreatedAt: now, StartedAt: now}
	require.NoError(t, pg.CreateRun(context.Background(), run))
	run.Status, run.EndedAt = state.RunSucceeded, now.Add(time.Second)
	require.NoError(t, pg.SaveRun(context.Background(), run, state.Event{Type: "run.succeeded"}))

	e := replicaOn(t, &staleRead{Store: pg, stale: run.ID}, map[string]string{"gate.yaml": "version: 1\nname: gate\nsteps:\n  - {id: hi, uses: log, with: {message: hi}}\n"})
	rep := e.do("POST", "/api/v1/runs/"+run.ID+"/cancel", token, nil)
	assert.Equal(t, 409, rep.status, "%s", rep.body)
	assert.JSONEq(t, `{"error":"run `+run.ID+` is already succeeded","code":"conflict"}`, string(rep.body))
	got, err := pg.GetRun(context.Background(), run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, got.Status)
}
