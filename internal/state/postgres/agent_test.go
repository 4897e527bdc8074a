package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestAgentContract(t *testing.T) {
	statetest.RunAgents(t, func(t *testing.T) state.Store {
		return open(t, pgtest.DB(t), postgres.Options{})
	})
}

// A placement tells the other replicas with its own commit which
// sessions it placed on (their polls may be held there); a placement that
// places nothing tells nothing. The notices arrive in commit order, so a
// marker sent after an empty placement is the next one heard.
func TestAPlacementTellsTheOtherReplicasTheSessionsItPlacedOn(t *testing.T) {
	a, b := replicas(t)
	notices := make(chan state.Notice, 16)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = b.Listen(lctx, func(n state.Notice) { notices <- n }) }()
	assert.Equal(t, state.Notice{Kind: state.NoticeListening}, next(t, notices))

	for _, id := range []string{"s-1", "s-2"} {
		require.NoError(t, a.OpenAgentSession(ctx, state.AgentSession{ID: id, Name: "web-" + id, Labels: map[string]string{"role": "web"},
			Capacity: 1, Key: []byte("key")}, time.Hour))
	}
	seal := func(a state.AgentAssignment, _ state.AgentSession) ([]byte, error) { return []byte(a.ID), nil }
	for i, labels := range []map[string]string{{"role": "web"}, {"role": "web"}, {"role": "db"}} {
		id := fmt.Sprint("a-", i)
		_, err := a.AddAgentAssignment(ctx, state.AgentAssignment{ID: id, RunID: "run-" + id, Step: "deploy", Attempt: 1, Type: "shell",
			Labels: labels, Owner: "r1", OwnerKey: []byte("key of r1")})
		require.NoError(t, err)
	}
	pl, err := a.PlaceAgentAssignments(ctx, "r1", seal)
	require.NoError(t, err)
	require.Len(t, pl.Placed, 2)
	n := next(t, notices)
	assert.Equal(t, state.NoticeAgent, n.Kind)
	assert.ElementsMatch(t, []string{state.AgentSessionSubject("s-1"), state.AgentSessionSubject("s-2")}, strings.Fields(n.Key))

	// a-2 (role=db) still waits, and no agent takes it.
	pl, err = a.PlaceAgentAssignments(ctx, "r1", seal)
	require.NoError(t, err)
	require.Empty(t, pl.Placed)
	require.NoError(t, a.Notify(ctx, state.Notice{Kind: state.NoticeWork}))
	assert.Equal(t, state.Notice{Kind: state.NoticeWork}, next(t, notices), "a placement that placed nothing told nothing")
}
