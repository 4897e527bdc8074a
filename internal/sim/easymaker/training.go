package easymaker

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

// Simulated durations.
const (
	experimentReady   = 20 * time.Second
	trainingRunning   = time.Minute
	trainingDuration  = 5 * time.Minute
	trainingFailAfter = 2 * time.Minute
	stopDuration      = 30 * time.Second
)

// FailTrainTrigger in a training's name, or a hyperparameter
// sim_fail=true, makes the training end in FAIL_TRAIN.
const FailTrainTrigger = "fail-train"

type experiment struct {
	v  em.Experiment
	tl timeline
}

type training struct {
	v           em.Training
	tl          timeline
	reason      string    // statusReason once failing or stopped
	tuning      *tuning   // set for a tuning's trial
	trial       string    // trial status code (trials only)
	metricsFrom time.Time // metrics show from this time (COMPLETE, or an early stop)
}

func (s *Service) experimentView(e *experiment) em.Experiment {
	v := e.v
	v.ExperimentStatusCode, v.UpdatedDatetime = e.tl.state(s.now())
	return v
}

func (s *Service) createExperiment(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeRequest[em.CreateExperimentRequest](r)
	if err != nil {
		return err
	}
	// An existing name answers the existing experiment (FIDELITY: the SDK
	// returns the existing ID).
	for _, e := range s.experiments {
		if e.v.ExperimentName == req.ExperimentName {
			writeOK(w, http.StatusOK, "experiment", s.experimentView(e))
			return nil
		}
	}
	now := s.now()
	e := &experiment{
		v: em.Experiment{ExperimentID: s.newID(), ExperimentName: req.ExperimentName, ExperimentDescription: req.ExperimentDescription,
			TagList: req.TagList, CreatedDatetime: now},
		tl: schedule(now, time.Duration(0), em.StatusCreateRequested, 5*time.Second, em.StatusCreateInProgress, experimentReady, em.StatusActive),
	}
	s.experiments = append(s.experiments, e)
	writeOK(w, http.StatusCreated, "experiment", s.experimentView(e))
	return nil
}

// deleteExperiment refuses while the experiment holds trainings or
// tunings, as the real service does.
func (s *Service) deleteExperiment(w http.ResponseWriter, r *http.Request, id string) error {
	e, err := s.all.experiments.lookup(id)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range s.trainings {
		if t.v.ExperimentID == id && t.tuning == nil {
			n++
		}
	}
	for _, t := range s.tunings {
		if t.v.ExperimentID == id {
			n++
		}
	}
	if n > 0 {
		return errf(http.StatusConflict, codeConflict, "experiment %s holds %d trainings or tunings; delete them first", id, n)
	}
	s.all.experiments.remove(e)
	writeOK(w, http.StatusOK, "", nil)
	return nil
}

// activeExperiment checks that id names an ACTIVE experiment.
func (s *Service) activeExperiment(id string) error {
	e := s.all.experiments.find(id)
	if e == nil {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: experiment_id: experiment %s does not exist", id)
	}
	if st := e.tl.at(s.now()); st != em.StatusActive {
		return errf(http.StatusBadRequest, codeInvalid, "experiment %s is not ACTIVE (status %s); wait for it", id, st)
	}
	return nil
}

// checkRefs checks the image, flavor and algorithm IDs of a run.
func (s *Service) checkRefs(imageID, flavorID, algorithmID string) error {
	var bad []string
	if !s.image(imageID) {
		bad = append(bad, fmt.Sprintf("image_id: image %s does not exist", imageID))
	}
	if !s.flavor(flavorID) {
		bad = append(bad, fmt.Sprintf("flavor_id: instance type %s does not exist", flavorID))
	}
	if algorithmID != "" && s.algorithm(algorithmID) == nil {
		bad = append(bad, fmt.Sprintf("algorithm_id: algorithm %s does not exist", algorithmID))
	}
	if len(bad) > 0 {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: %s", strings.Join(bad, "; "))
	}
	return nil
}

func (s *Service) trainingView(t *training) em.Training {
	now := s.now()
	v := t.v
	v.TrainingStatusCode, v.UpdatedDatetime = t.tl.state(now)
	if t.metricsFrom.IsZero() || now.Before(t.metricsFrom) {
		v.MetricList = nil
	}
	if strings.Contains(v.TrainingStatusCode, "FAIL") || strings.Contains(v.TrainingStatusCode, "STOP") {
		v.StatusReason = t.reason
	}
	return v
}

func failRequested(name string, hps []em.Hyperparameter) string {
	if strings.Contains(strings.ToLower(name), FailTrainTrigger) {
		return fmt.Sprintf("training process exited with code 1 (simulated: the name contains %q)", FailTrainTrigger)
	}
	for _, h := range hps {
		if h.HyperparameterKey == "sim_fail" && strings.EqualFold(h.HyperparameterValue, "true") {
			return "training process exited with code 1 (simulated: hyperparameter sim_fail=true)"
		}
	}
	return ""
}

// metricNames are the metrics a run reports: its metric list, else its
// algorithm's, else loss and accuracy.
func (s *Service) metricNames(list []string, algorithmID string) []string {
	if len(list) > 0 {
		return list
	}
	if a := s.algorithm(algorithmID); a != nil {
		return a.MetricList
	}
	return []string{"loss", "accuracy"}
}

func (s *Service) createTraining(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeRequest[em.CreateTrainingRequest](r)
	if err != nil {
		return err
	}
	if err := s.activeExperiment(req.ExperimentID); err != nil {
		return err
	}
	if err := s.checkRefs(req.ImageID, req.FlavorID, req.AlgorithmID); err != nil {
		return err
	}
	for _, t := range s.trainings {
		if t.tuning == nil && t.v.ExperimentID == req.ExperimentID && t.v.TrainingName == req.TrainingName {
			return errf(http.StatusConflict, codeConflict, "a training named %q already exists in experiment %s (%s)", req.TrainingName, req.ExperimentID, t.v.TrainingID)
		}
	}
	now := s.now()
	if req.TimeoutHours == 0 {
		req.TimeoutHours = em.MaxTimeoutHours
	}
	if req.UseTorchrun && req.NprocPerNode == 0 {
		req.NprocPerNode = 1
	}
	t := &training{v: em.Training{
		TrainingID: s.newID(), TrainingName: req.TrainingName, TrainingDescription: req.TrainingDescription,
		ExperimentID: req.ExperimentID, ImageID: req.ImageID, FlavorID: req.FlavorID, AlgorithmID: req.AlgorithmID,
		DistributedNodeCount: req.DistributedNodeCount, UseTorchrun: req.UseTorchrun, NprocPerNode: req.NprocPerNode,
		DataStorageSize: req.DataStorageSize, SourceDirURI: req.SourceDirURI, EntryPoint: req.EntryPoint,
		ModelUploadURI: req.ModelUploadURI, CheckPointInputURI: req.CheckPointInputURI, CheckPointUploadURI: req.CheckPointUploadURI,
		TimeoutHours: req.TimeoutHours, HyperparameterList: req.HyperparameterList, DatasetList: req.DatasetList,
		TagList: req.TagList, UseLog: req.UseLog, CreatedDatetime: now,
	}}
	if reason := failRequested(req.TrainingName, req.HyperparameterList); reason != "" {
		t.reason = reason
		t.tl = schedule(now, time.Duration(0), em.StatusCreateRequested, 10*time.Second, em.StatusCreateInProgress,
			trainingRunning, em.StatusRunning, trainingFailAfter, em.StatusFailTrainInProgress,
			trainingFailAfter+stopDuration, em.StatusFailTrain)
	} else {
		t.tl = schedule(now, time.Duration(0), em.StatusCreateRequested, 10*time.Second, em.StatusCreateInProgress,
			trainingRunning, em.StatusRunning, trainingDuration-time.Minute, em.StatusCompleteInProgress,
			trainingDuration, em.StatusComplete)
		q := quality(s.env.Seed, req.HyperparameterList, nil)
		t.v.MetricList = metricValues(s.env.Seed, s.metricNames(nil, req.AlgorithmID), "", "", q)
		t.metricsFrom = now.Add(trainingDuration)
	}
	s.trainings = append(s.trainings, t)
	writeOK(w, http.StatusCreated, "training", s.trainingView(t))
	return nil
}

// listTrainings lists the trainings (?experimentId= filters); a tuning's
// trials are listed only with ?hyperparameterTuningId=.
func (s *Service) listTrainings(w http.ResponseWriter, r *http.Request) error {
	exp, tun := r.URL.Query().Get("experimentId"), r.URL.Query().Get("hyperparameterTuningId")
	return s.all.trainings.list(w, r, func(t *training) bool {
		return (tun == "") == (t.tuning == nil) && (tun == "" || t.v.HyperparameterTuningID == tun) &&
			(exp == "" || t.v.ExperimentID == exp)
	})
}

// stopTraining moves a training that has not finished to
// STOP_IN_PROGRESS, then STOPPED; a finished one answers 400.
func (s *Service) stopTraining(w http.ResponseWriter, r *http.Request, id string) error {
	t, err := s.all.trainings.lookup(id)
	if err != nil {
		return err
	}
	if t.tuning != nil {
		return errf(http.StatusBadRequest, codeInvalid, "training %s is a trial of tuning %s; stop the tuning", id, t.tuning.v.HyperparameterTuningID)
	}
	if t.tl, err = s.all.trainings.stopped(id, t.tl, s.now()); err != nil {
		return err
	}
	t.reason, t.metricsFrom = "stopped by request", time.Time{}
	s.all.trainings.answer(w, http.StatusOK, t)
	return nil
}

// deleteTraining removes a finished training; a running one must be
// stopped first (400), a trial goes with its tuning.
func (s *Service) deleteTraining(w http.ResponseWriter, r *http.Request, id string) error {
	t, err := s.all.trainings.lookup(id)
	if err != nil {
		return err
	}
	if t.tuning != nil {
		return errf(http.StatusBadRequest, codeInvalid, "training %s is a trial of tuning %s; delete the tuning", id, t.tuning.v.HyperparameterTuningID)
	}
	if err := s.all.trainings.deletable(id, t.tl, s.now()); err != nil {
		return err
	}
	s.all.trainings.remove(t)
	writeOK(w, http.StatusOK, "", nil)
	return nil
}
