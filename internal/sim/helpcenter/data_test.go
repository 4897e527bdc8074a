package helpcenter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGeneratedDataIsStableWithinADayAndNeverInTheFuture(t *testing.T) {
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, seoul())
	morning := generate(1, 300, day.Add(9*time.Hour))
	evening := generate(1, 300, day.Add(21*time.Hour))
	require.Len(t, evening, len(morning))
	for i := range morning {
		require.Equal(t, morning[i].updated, evening[i].updated, "notice %d moved between two starts on the same day", morning[i].id)
		require.Equal(t, morning[i].display, evening[i].display)
		require.False(t, morning[i].updated.After(day.Add(9*time.Hour)), "notice %d is updated in the future", morning[i].id)
	}
}
