package bolt_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestAuthContract(t *testing.T) {
	statetest.RunAuth(t, func(t *testing.T) state.AuthStore {
		s, _ := openTemp(t, bolt.Options{})
		return s
	})
}

// An audit record written before a restart is read after it, by a
// read-only store too; a file without auth buckets reads as empty.
func TestAuditSurvivesReopen(t *testing.T) {
	s, path := openTemp(t, bolt.Options{})
	recs, err := s.Audit(t.Context(), state.AuditFilter{})
	must(t, err)
	if len(recs) != 0 {
		t.Fatalf("new file: %d audit records", len(recs))
	}
	must(t, s.AppendAudit(t.Context(), state.AuditRecord{Identity: "alice", Action: "run.start", Result: "ok"}))
	must(t, s.Close())
	s2, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	must(t, err)
	defer s2.Close()
	recs, err = s2.Audit(t.Context(), state.AuditFilter{})
	must(t, err)
	if len(recs) != 1 || recs[0].Identity != "alice" || recs[0].Seq != 1 {
		t.Fatalf("after reopen: %+v", recs)
	}
}
