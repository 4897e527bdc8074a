package state_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

func TestARunCursorReadsBackFromItsToken(t *testing.T) {
	for _, c := range []state.RunCursor{
		{CreatedAt: time.Date(2026, 11, 25, 9, 0, 0, 123456789, time.UTC), ID: "20261125T090000-a1b2c3"},
		{CreatedAt: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC), ID: "20261125T090000-a1b2c3.deploy.3"},
		{CreatedAt: time.Date(1969, 7, 20, 0, 0, 0, 0, time.UTC), ID: "old"},
	} {
		got, err := state.ParseRunCursor(c.String())
		require.NoError(t, err, c.String())
		assert.True(t, got.CreatedAt.Equal(c.CreatedAt), c.String())
		assert.Equal(t, c.ID, got.ID)
	}
}

func TestAPageLinkOfAnEarlierBuildStillReads(t *testing.T) {
	got, err := state.ParseRunCursor("57.1764061200000000001.20261125T090000-a1b2c3")
	require.NoError(t, err)
	assert.Equal(t, int64(1764061200000000001), got.CreatedAt.UnixNano())
	assert.Equal(t, "20261125T090000-a1b2c3", got.ID)
}

func TestATokenThatIsNoCursorIsRefused(t *testing.T) {
	for _, s := range []string{"", "abc", "12", "12.", "x.id", "1."} {
		_, err := state.ParseRunCursor(s)
		assert.Error(t, err, s)
	}
}

func TestARunFollowsACursorWhenOlderOrTiedWithASmallerID(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	c := &state.RunCursor{CreatedAt: t0, ID: "m"}
	assert.True(t, c.Follows(&state.Run{ID: "z", CreatedAt: t0.Add(-time.Nanosecond)}))
	assert.True(t, c.Follows(&state.Run{ID: "a", CreatedAt: t0}))
	assert.False(t, c.Follows(&state.Run{ID: "m", CreatedAt: t0}))
	assert.False(t, c.Follows(&state.Run{ID: "n", CreatedAt: t0}))
	assert.False(t, c.Follows(&state.Run{ID: "a", CreatedAt: t0.Add(time.Nanosecond)}))
	assert.True(t, (*state.RunCursor)(nil).Follows(&state.Run{ID: "a"}))
}
