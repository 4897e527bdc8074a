package bolt_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestStepOutputContract(t *testing.T) {
	statetest.RunStepOutput(t, func(t *testing.T) statetest.OutputStore {
		s, _ := openTemp(t, bolt.Options{})
		return s
	})
}
