package easymaker

import (
	"fmt"
	"time"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

// SeedExperiment adds an experiment that is already ACTIVE (created
// experimentReady before now) and returns its ID, for tests that start
// from a declared world: `runbook test` seeds world.easymaker.experiments
// with it. A name that exists is refused: a seeded world is one the
// service could have reached itself, and it never holds two experiments
// of one name.
func (s *Service) SeedExperiment(name, description string) (string, error) {
	req := em.CreateExperimentRequest{ExperimentName: name, ExperimentDescription: description}
	if ps := req.Problems(); len(ps) > 0 {
		return "", fmt.Errorf("seed experiment %q: %s", name, ps[0].Message)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.experiments {
		if e.v.ExperimentName == name {
			return "", fmt.Errorf("seed experiment %q: an experiment with that name exists", name)
		}
	}
	now := s.now()
	created := now.Add(-experimentReady - time.Second)
	e := &experiment{
		v:  em.Experiment{ExperimentID: s.newID(), ExperimentName: name, ExperimentDescription: description, CreatedDatetime: created},
		tl: schedule(created, time.Duration(0), em.StatusCreateRequested, 5*time.Second, em.StatusCreateInProgress, experimentReady, em.StatusActive),
	}
	s.experiments = append(s.experiments, e)
	return e.v.ExperimentID, nil
}
