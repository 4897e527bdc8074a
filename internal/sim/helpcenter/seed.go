package helpcenter

import (
	"fmt"
	"time"
)

// SeedNotice adds a notice as AddNotice does, but as if it had been
// written at `at` (created, updated and displayed then; zero: now), for
// tests that start from a declared world: `runbook test` seeds
// world.helpcenter.notices with it, so that a notice "5 days old" is old
// to a digest too, which reads the update time.
func (s *Service) SeedNotice(in NewNotice, at time.Time) (int, error) {
	if !at.IsZero() && in.DisplayDt == "" {
		in.DisplayDt = at.Format(time.RFC3339)
	}
	id, err := s.AddNotice(in)
	if err != nil || at.IsZero() {
		return id, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	nt, ok := s.byID[id]
	if !ok {
		return 0, fmt.Errorf("seed notice %d: not found after adding it", id)
	}
	nt.created, nt.updated = at, at
	return id, nil
}
