package bolt_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestAgentContract(t *testing.T) {
	statetest.RunAgents(t, func(t *testing.T) state.Store {
		s, _ := openTemp(t, bolt.Options{})
		return s
	})
}
