package identity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
)

// The simulator's identity endpoint is the real part these tests use: the
// connection it advertises works through ConfigFrom, and its tokens
// expire on its clock.
func TestTheSimulatorIssuesTokensThatAreRenewedOnItsClock(t *testing.T) {
	s, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity"}})
	require.NoError(t, err)
	t.Cleanup(s.Close)

	cfg, err := identity.ConfigFrom(s.Connections()["identity"])
	require.NoError(t, err)
	cfg.Now = s.Clock.Now
	src, err := identity.New(cfg)
	require.NoError(t, err)

	ctx := context.Background()
	first, err := src.Token(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, first)
	assert.InDelta(t, 12*time.Hour, src.Expires().Sub(s.Clock.Now()), float64(time.Minute))
	again, err := src.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, first, again)

	s.Clock.Advance(12*time.Hour - time.Minute)
	renewed, err := src.Token(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, first, renewed)

	t.Run("a wrong API password is unauthorized", func(t *testing.T) {
		bad := cfg
		bad.Password = "wrong"
		src, err := identity.New(bad)
		require.NoError(t, err)
		_, err = src.Token(ctx)
		require.Error(t, err)
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.NotContains(t, err.Error(), "wrong")
	})
}
