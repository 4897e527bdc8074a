package server_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
)

// gatedStore holds every run's first write after its creation until gate
// is closed, so that what a delivery's commit wrote can be measured apart
// from what its runs write as they execute.
type gatedStore struct {
	state.Store
	gate chan struct{}
}

func (s *gatedStore) SaveRun(ctx context.Context, r *state.Run, evs ...state.Event) error {
	return s.SaveRunSteps(ctx, r, nil, evs...)
}

func (s *gatedStore) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, evs ...state.Event) error {
	<-s.gate
	return s.Store.SaveRunSteps(ctx, r, recs, evs...)
}

// One 1,000-hook delivery grows the state file by at most 2 MB when it is
// answered: its body is stored once, and each of its 1,000 run records
// refers to it instead of carrying it (each carried the whole body: +175
// MB before). A bbolt file grows in powers of two up to 16 MB, so this
// bounds the pages the commit needed; the runs are held before their
// first write so that their execution is not counted.
func TestA1000HookDeliveryGrowsTheStateFileByAtMost2MB(t *testing.T) {
	gated := &gatedStore{gate: make(chan struct{})}
	e := newEnv(t, map[string]string{"hook.yaml": hookPlaybook}, func(o *server.Options) {
		gated.Store = o.Engine.Store
		o.Engine.Store = gated
	})
	size := func() int64 {
		fi, err := os.Stat(e.state)
		require.NoError(t, err)
		return fi.Size()
	}
	before := size()
	ids := postHooks(t, e, hooksBody(t, "big-1", 1000))
	require.Len(t, ids, 1000)
	grown := size() - before
	close(gated.gate)
	t.Logf("state file %d -> %d bytes (+%d) at the answer", before, before+grown, grown)
	require.LessOrEqual(t, grown, int64(2<<20), "state growth of one 1,000-hook delivery")
	e.waitStatus(ids[len(ids)-1], state.RunSucceeded)
}
