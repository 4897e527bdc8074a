package bolt_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

func TestCommitDeliveryKeepsADoneRecordOfAnyLength(t *testing.T) {
	for _, n := range []int{0, 17, 18, 4000} {
		t.Run(fmt.Sprintf("a done record of %d bytes", n), func(t *testing.T) {
			s, path := openTemp(t, bolt.Options{NoSync: true})
			done := bytes.Repeat([]byte("d"), n)
			res, err := s.CommitDelivery(ctx, state.Delivery{
				Key: "webhook/sms/d-1", TTL: time.Hour,
				Units: []state.DeliveryUnit{{Run: &state.Run{ID: "run-1", Playbook: "pb"}, Events: []state.Event{{Type: "run.created"}}}},
				Done:  func([]string, [][]byte) []byte { return done },
			})
			require.NoError(t, err)
			assert.Equal(t, []string{"run-1"}, res.Created)
			require.NoError(t, s.Close())

			s, err = bolt.Open(path, bolt.Options{NoSync: true})
			require.NoError(t, err)
			defer s.Close()
			got, err := s.DedupGet(ctx, "webhook/sms/d-1")
			require.NoError(t, err)
			assert.Equal(t, done, append([]byte{}, got...))
			res, err = s.CommitDelivery(ctx, state.Delivery{Key: "webhook/sms/d-1", TTL: time.Hour})
			require.NoError(t, err)
			assert.True(t, res.Duplicate)
			assert.Equal(t, done, append([]byte{}, res.Value...), "a duplicate gets the done record")
		})
	}
}
