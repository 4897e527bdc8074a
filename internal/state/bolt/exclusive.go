package bolt

import "github.com/runbook/runbook/internal/state"

var _ state.Exclusive = (*Store)(nil)

// Exclusive implements state.Exclusive: an open Store holds the file's
// lock (shared when read-only), so no other process writes to it, and
// none executes a run recorded in it.
func (s *Store) Exclusive() bool { return true }
