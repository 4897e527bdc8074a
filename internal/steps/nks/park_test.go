package nks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	simnks "github.com/runbook/runbook/internal/sim/nks"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// parkingHost parks every wait, as runbook serve's engine does for a
// long one.
type parkingHost struct{ *stepstest.Host }

func (parkingHost) Parks(time.Duration) bool { return true }

// Under a host that parks, a create with wait returns suspended until
// each next poll instead of waiting: run again from its checkpoint at
// that moment (as a resumed run is), it polls the same task without
// sending the create again, the interval between polls keeps growing
// across the suspensions, and it ends when the task succeeds.
func TestAWaitedCreateParksBetweenPollsAndCallsOnce(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks"}, Speed: 300,
		Start: time.Date(2026, 4, 4, 2, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	s := &opsSim{t: t, srv: srv, svc: srv.Service("nks").(*simnks.Service), conn: srv.Connections()["nks"], ran: map[string]int{}}

	with := createWith("prod", "v1.30.3")
	with["wait"] = true
	d, c := s.call("nks.cluster.create", with)
	h := stepstest.HostOf(c)
	c.Host = parkingHost{h}

	var parks int
	var intervals []time.Duration
	var out steps.Outputs
	for {
		out, err = d.Run(context.Background(), c)
		var parked *steps.Suspended
		if !errors.As(err, &parked) {
			break
		}
		require.ErrorIs(t, err, fault.ErrSuspended, "a parked wait is a suspension, not a failure")
		parks++
		require.Less(t, parks, 50, "the task never ended")
		var cp struct {
			Wait struct{ Interval time.Duration } `json:"wait"`
		}
		require.NoError(t, json.Unmarshal(h.LastCheckpoint(), &cp))
		intervals = append(intervals, cp.Wait.Interval)
		c.Resume = h.LastCheckpoint()
		time.Sleep(time.Until(parked.Until))
	}
	require.NoError(t, err)
	assert.Equal(t, cloud.TaskSuccess, out["task_status"])
	assert.GreaterOrEqual(t, parks, 2, "the wait parked between its polls")
	assert.Len(t, srv.Journal.Calls("nks", http.MethodPost, "/v1/clusters"), 1, "the create is sent once")
	for i := 1; i < len(intervals); i++ {
		assert.Greater(t, intervals[i], intervals[i-1], "the polls slow down across suspensions: %v", intervals)
	}
}
