package bolt_test

import (
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestExportContract(t *testing.T) {
	open := func(t *testing.T, now func() time.Time) statetest.ExportStore {
		s, _ := openTemp(t, bolt.Options{Now: now})
		return s
	}
	statetest.RunExport(t, open, open)
}
