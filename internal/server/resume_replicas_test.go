package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// A resume asked of replica B for a run parked on replica A goes on on A
// (a notice: A's poll is not involved), the sleep ending as the same
// attempt; B neither takes the run nor answers a resume it cannot give.
// A run parked on A for an approval's answer is refused by B saying so,
// as A would.
func TestAResumeThroughAnotherReplicaWakesTheRunWhereItIsParked(t *testing.T) {
	dsn := pgtest.DB(t)
	open := func() *postgres.Store { return openPG(t, dsn) }
	pbs := map[string]string{"nap.yaml": napPlaybook, "gate.yaml": approvalPlaybook}
	replica := func(process string) envOption {
		return func(o *server.Options) { o.Engine.Process = process }
	}
	a := replicaOn(t, open(), pbs, replica("host/a"))
	b := replicaOn(t, open(), pbs, replica("host/b"))

	nap := a.startRun("nap", nil)
	gate := a.startRun("gate", nil)
	a.waitParked(2)

	r := b.api("POST", "/api/v1/runs/"+gate+"/resume", map[string]any{})
	assert.Equal(t, 409, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "waiting for an answer to approval step ok")

	r = b.api("POST", "/api/v1/runs/"+nap+"/resume", map[string]any{})
	require.Equal(t, 202, r.status, "%s", r.body)
	m := a.waitStatus(nap, state.RunSucceeded)
	assert.EqualValues(t, 1, stepsByID(m)["nap"]["attempts"], "the same attempt")
	assert.Equal(t, "host/a", m["owner"], "A went on with it")
	a.waitParked(1)
	assert.Equal(t, float64(0), b.metric("runbook_runs_parked"))
}

// A resume asked of replica B for a run parked on replica A is answered
// 202 only once A has it on record: with A deaf to resume notices, B
// answers 503 after its wait, and the run stays parked until its own
// time. A resume A recorded outlives A (for one server,
// TestAResumeAnsweredOutlivesAStopBeforeTheRunHadASlot).
func TestAResumeThroughAnotherReplicaIsAnsweredOnlyOnceTheHolderRecordedIt(t *testing.T) {
	dsn := pgtest.DB(t)
	pbs := map[string]string{"nap.yaml": napPlaybook}
	a := replicaOn(t, deafToResumes{openPG(t, dsn)}, pbs, func(o *server.Options) { o.Engine.Process = "host/a" })
	b := replicaOn(t, openPG(t, dsn), pbs, func(o *server.Options) { o.Engine.Process = "host/b" })
	nap := a.startRun("nap", nil)
	a.waitParked(1)

	start := time.Now()
	r := b.api("POST", "/api/v1/runs/"+nap+"/resume", map[string]any{})
	assert.Equal(t, 503, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "did not record the resume")
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Second, "B waited for A")
	m := a.api("GET", "/api/v1/runs/"+nap, nil).json(t)
	assert.Equal(t, "waiting", m["status"])
	assert.Nil(t, m["woken_early"])
	assert.Equal(t, float64(1), a.metric("runbook_runs_parked"))
}

// deafToResumes is a store whose notices reach its replica, but for the
// resumes asked through other replicas.
type deafToResumes struct{ *postgres.Store }

func (d deafToResumes) Listen(ctx context.Context, fn func(state.Notice)) error {
	return d.Store.Listen(ctx, func(n state.Notice) {
		if n.Kind != state.NoticeResume {
			fn(n)
		}
	})
}

// A resume recorded by the replica holding the run outlives that replica:
// replica A, whose only slot is taken, records the resume of a parked
// sleep and stops before the run had the slot; replica B takes the run
// over and ends the sleep at once (the same attempt), not at its first
// deadline an hour later.
func TestAResumeRecordedOnAReplicaIsKeptByTheReplicaThatTakesTheRunOver(t *testing.T) {
	dsn := pgtest.DB(t)
	gate := filepath.Join(t.TempDir(), "gate")
	pbs := map[string]string{"nap.yaml": napPlaybook, "hold.yaml": `version: 1
name: hold
steps:
  - {id: wait, uses: shell, with: {command: "while [ ! -e ` + gate + ` ]; do sleep 0.02; done"}}
`}
	a := replicaOn(t, openPG(t, dsn), pbs, func(o *server.Options) {
		o.Engine.Process, o.MaxRunning, o.ShutdownGrace = "host/a", 1, 200*time.Millisecond
	})
	nap := a.startRun("nap", nil)
	a.waitParked(1)
	hold := a.startRun("hold", nil)
	a.waitStep(hold, "wait", state.StepRunning) // A's only slot

	r := a.api("POST", "/api/v1/runs/"+nap+"/resume", map[string]any{})
	require.Equal(t, 202, r.status, "%s", r.body)
	assert.Equal(t, "waiting", a.api("GET", "/api/v1/runs/"+nap, nil).json(t)["status"], "no slot yet")
	a.stop()

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	b := replicaOn(t, openPG(t, dsn), pbs, func(o *server.Options) { o.Engine.Process = "host/b" })
	m := b.waitStatus(nap, state.RunSucceeded)
	steps := stepsByID(m)
	assert.Equal(t, "succeeded", steps["nap"]["status"], "the sleep ended at the resume")
	assert.EqualValues(t, 1, steps["nap"]["attempts"], "the same attempt")
	assert.Equal(t, "host/b", m["owner"])
}
