package bolt_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestSessionContract(t *testing.T) {
	statetest.RunSessions(t, func(t *testing.T) state.SessionStore {
		s, _ := openTemp(t, bolt.Options{})
		return s
	})
}
