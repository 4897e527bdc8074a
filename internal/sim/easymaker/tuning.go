package easymaker

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

// Tuning defaults and timing.
const (
	DefaultMaxTrialCount = 6
	maxGridTrials        = 100
	trialDuration        = 3 * time.Minute
	trialSteps           = 10 // a trial's duration is split in this many training steps
	// FailTuneTrigger in a tuning's name makes every trial fail.
	FailTuneTrigger = "fail-tune"
)

// Trial status codes besides the training's.
const trialEarlyStopped = "EARLY_STOPPED"

type tuning struct {
	v         em.HyperparameterTuning
	tl        timeline
	trials    []*training
	reason    string
	objective string
	objType   string
}

// better reports whether a beats b under the objective type.
func better(a, b float64, objType string) bool {
	if objType == em.ObjectiveMinimize {
		return a < b
	}
	return a > b
}

func (s *Service) tuningView(t *tuning) em.HyperparameterTuning {
	now := s.now()
	v := t.v
	v.HyperparameterTuningStatusCode, v.UpdatedDatetime = t.tl.state(now)
	if strings.Contains(v.HyperparameterTuningStatusCode, "FAIL") || strings.Contains(v.HyperparameterTuningStatusCode, "STOP") {
		v.StatusReason = t.reason
	}
	v.TrialList = []em.Trial{}
	var best *training
	bestVal := 0.0
	for _, tr := range t.trials {
		st := tr.tl.at(now)
		if st == "" {
			continue // not started yet
		}
		trial := em.Trial{TrainingID: tr.v.TrainingID, TrialStatusCode: st, HyperparameterList: tr.v.HyperparameterList}
		if !tr.metricsFrom.IsZero() && !now.Before(tr.metricsFrom) {
			trial.MetricList = tr.v.MetricList
		}
		switch {
		case st == em.StatusComplete:
			v.CompletedTrialCount++
			if val, ok := metricValue(tr.v.MetricList, t.objective); ok && (best == nil || better(val, bestVal, t.objType)) {
				best, bestVal = tr, val
			}
		case st == em.StatusStopped && tr.trial == trialEarlyStopped:
			trial.TrialStatusCode = trialEarlyStopped
			v.EarlyStoppedTrialCount++
		case strings.HasPrefix(st, "FAIL"):
			v.FailedTrialCount++
		}
		v.TrialList = append(v.TrialList, trial)
	}
	if best != nil && (v.HyperparameterTuningStatusCode == em.StatusComplete || v.HyperparameterTuningStatusCode == em.StatusStopped) {
		v.BestTrainingID = best.v.TrainingID
		v.BestMetricList = best.v.MetricList
		v.BestHyperparameterList = best.v.HyperparameterList
		v.BestObjectiveMetricValue = &bestVal
	}
	return v
}

// sampler draws a trial's hyperparameters from the spec list.
type sampler struct {
	specs []em.HyperparameterSpec
	rnd   *rand.Rand
	grid  bool
}

func specValues(sp em.HyperparameterSpec) []string {
	switch sp.HyperparameterTypeCode {
	case em.HyperparameterTypeDisc, em.HyperparameterTypeCat:
		var out []string
		for _, v := range strings.Split(sp.HyperparameterSpecifiedValues, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	lo, hi, step := *sp.HyperparameterMinValue, *sp.HyperparameterMaxValue, 1.0
	if sp.HyperparameterStep != nil && *sp.HyperparameterStep > 0 {
		step = *sp.HyperparameterStep
	}
	var out []string
	for x := lo; x <= hi+1e-9 && len(out) < maxGridTrials; x += step {
		out = append(out, formatValue(sp.HyperparameterTypeCode, x))
	}
	return out
}

func formatValue(typ string, x float64) string {
	if typ == em.HyperparameterTypeInt {
		return strconv.Itoa(int(math.Round(x)))
	}
	return strconv.FormatFloat(math.Round(x*1e6)/1e6, 'g', -1, 64)
}

// gridSize is the number of combinations of the grid (capped).
func gridSize(specs []em.HyperparameterSpec) int {
	n := 1
	for _, sp := range specs {
		n *= max(1, len(specValues(sp)))
		if n > maxGridTrials {
			return maxGridTrials
		}
	}
	return n
}

func (sm *sampler) trial(i int) []em.Hyperparameter {
	out := make([]em.Hyperparameter, 0, len(sm.specs))
	for _, sp := range sm.specs {
		var v string
		switch {
		case sm.grid:
			vals := specValues(sp)
			if len(vals) == 0 {
				continue
			}
			v = vals[i%len(vals)]
			i /= len(vals)
		case sp.HyperparameterTypeCode == em.HyperparameterTypeInt:
			lo, hi := int(*sp.HyperparameterMinValue), int(*sp.HyperparameterMaxValue)
			v = strconv.Itoa(lo + sm.rnd.IntN(hi-lo+1))
		case sp.HyperparameterTypeCode == em.HyperparameterTypeFloat:
			lo, hi := *sp.HyperparameterMinValue, *sp.HyperparameterMaxValue
			v = formatValue(sp.HyperparameterTypeCode, lo+sm.rnd.Float64()*(hi-lo))
		default:
			vals := specValues(sp)
			if len(vals) == 0 {
				continue
			}
			v = vals[sm.rnd.IntN(len(vals))]
		}
		out = append(out, em.Hyperparameter{HyperparameterKey: sp.HyperparameterName, HyperparameterValue: v})
	}
	return out
}

// position places a value in its spec's range, for quality().
func (sm *sampler) position(key, value string) (float64, bool) {
	for _, sp := range sm.specs {
		if sp.HyperparameterName != key {
			continue
		}
		switch sp.HyperparameterTypeCode {
		case em.HyperparameterTypeInt, em.HyperparameterTypeFloat:
			x, err := strconv.ParseFloat(value, 64)
			lo, hi := *sp.HyperparameterMinValue, *sp.HyperparameterMaxValue
			if err != nil || hi <= lo {
				return 0.5, err == nil
			}
			return (x - lo) / (hi - lo), true
		case em.HyperparameterTypeDisc:
			vals := specValues(sp)
			for i, v := range vals {
				if v == value && len(vals) > 1 {
					return float64(i) / float64(len(vals)-1), true
				}
			}
		}
	}
	return 0, false
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func (s *Service) createTuning(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeRequest[em.CreateTuningRequest](r)
	if err != nil {
		return err
	}
	if err := s.activeExperiment(req.ExperimentID); err != nil {
		return err
	}
	if err := s.checkRefs(req.ImageID, req.FlavorID, req.AlgorithmID); err != nil {
		return err
	}
	for _, t := range s.tunings {
		if t.v.ExperimentID == req.ExperimentID && t.v.HyperparameterTuningName == req.HyperparameterTuningName {
			return errf(http.StatusConflict, codeConflict, "a hyperparameter tuning named %q already exists in experiment %s (%s)",
				req.HyperparameterTuningName, req.ExperimentID, t.v.HyperparameterTuningID)
		}
	}
	names := s.metricNames(req.MetricList, req.AlgorithmID)
	objective := req.ObjectiveMetricName
	if objective == "" {
		objective = names[0]
	}
	if !contains(names, objective) {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: objective_metric_name: %q is not a metric of the algorithm (%s)", objective, strings.Join(names, ", "))
	}
	objType := req.ObjectiveTypeCode
	if objType == "" {
		objType = em.ObjectiveMaximize
		if lowerIsBetter(objective, "", "") {
			objType = em.ObjectiveMinimize
		}
	}
	if req.TimeoutHours == 0 {
		req.TimeoutHours = em.MaxTimeoutHours
	}
	if req.EarlyStoppingMinTrialCount == 0 {
		req.EarlyStoppingMinTrialCount = 3
	}
	if req.EarlyStoppingStartStep == 0 {
		req.EarlyStoppingStartStep = 4
	}
	if req.UseTorchrun && req.NprocPerNode == 0 {
		req.NprocPerNode = 1
	}
	sm := &sampler{specs: req.HyperparameterSpecList, grid: req.TuningStrategyName == em.StrategyGrid}
	n := req.MaxTrialCount
	if sm.grid {
		if g := gridSize(sm.specs); n == 0 || g < n {
			n = g
		}
	} else if n == 0 {
		n = DefaultMaxTrialCount
	}
	stream := hashString(req.HyperparameterTuningName)
	if req.TuningStrategyRandomState != nil {
		stream = uint64(*req.TuningStrategyRandomState)
	}
	sm.rnd = rand.New(rand.NewPCG(s.env.Seed, stream))

	now := s.now()
	t := &tuning{objective: objective, objType: objType, v: em.HyperparameterTuning{
		HyperparameterTuningID: s.newID(), HyperparameterTuningName: req.HyperparameterTuningName,
		HyperparameterTuningDescription: req.HyperparameterTuningDescription, ExperimentID: req.ExperimentID,
		ImageID: req.ImageID, FlavorID: req.FlavorID, AlgorithmID: req.AlgorithmID,
		DistributedNodeCount: req.DistributedNodeCount, ParallelTrialCount: req.ParallelTrialCount,
		UseTorchrun: req.UseTorchrun, NprocPerNode: req.NprocPerNode, DataStorageSize: req.DataStorageSize,
		SourceDirURI: req.SourceDirURI, EntryPoint: req.EntryPoint, ModelUploadURI: req.ModelUploadURI,
		CheckPointInputURI: req.CheckPointInputURI, CheckPointUploadURI: req.CheckPointUploadURI,
		TimeoutHours: req.TimeoutHours, HyperparameterSpecList: req.HyperparameterSpecList, DatasetList: req.DatasetList,
		MetricList: names, MetricRegex: req.MetricRegex, ObjectiveMetricName: objective, ObjectiveTypeCode: objType,
		ObjectiveGoal: req.ObjectiveGoal, MaxFailedTrialCount: req.MaxFailedTrialCount, MaxTrialCount: n,
		TuningStrategyName: req.TuningStrategyName, TuningStrategyRandomState: req.TuningStrategyRandomState,
		EarlyStoppingAlgorithm: req.EarlyStoppingAlgorithm, EarlyStoppingMinTrialCount: req.EarlyStoppingMinTrialCount,
		EarlyStoppingStartStep: req.EarlyStoppingStartStep, TagList: req.TagList, UseLog: req.UseLog, CreatedDatetime: now,
	}}
	end, failed := s.runTrials(t, sm, n, now.Add(trainingRunning), strings.Contains(strings.ToLower(req.HyperparameterTuningName), FailTuneTrigger))
	head := schedule(now, time.Duration(0), em.StatusCreateRequested, 10*time.Second, em.StatusCreateInProgress, trainingRunning, em.StatusRunning)
	if failed != "" {
		t.reason = failed
		t.tl = append(head, phase{end, em.StatusFailHyperparameterTuning})
	} else {
		t.tl = append(head, phase{end, em.StatusCompleteInProgress}, phase{end.Add(stopDuration), em.StatusComplete})
	}
	s.tunings = append(s.tunings, t)
	writeOK(w, http.StatusCreated, "hyperparameterTuning", s.tuningView(t))
	return nil
}

// runTrials schedules up to n trials on parallelTrialCount slots from
// start: each draws hyperparameters, gets metrics from them and the seed,
// and may stop early by MEDIAN (at early_stopping_start_step of
// trialSteps, when at least early_stopping_min_trial_count trials have
// finished and its objective is worse than their median). Scheduling
// ends at n trials, when a finished trial reached objective_goal, or when
// failures reach max_failed_trial_count. It returns when the last trial
// ends, and why the tuning fails ("" if it does not).
func (s *Service) runTrials(t *tuning, sm *sampler, n int, start time.Time, failAll bool) (time.Time, string) {
	slots := make([]time.Time, t.v.ParallelTrialCount)
	for i := range slots {
		slots[i] = start
	}
	type done struct {
		at  time.Time
		obj float64
	}
	var finishedTrials []done
	failed := 0
	end := start
	esOffset := trialDuration * time.Duration(min(t.v.EarlyStoppingStartStep, trialSteps)) / trialSteps
	reason := ""
	for i := 0; i < n; i++ {
		k := 0
		for j := range slots {
			if slots[j].Before(slots[k]) {
				k = j
			}
		}
		ts := slots[k]
		if g := t.v.ObjectiveGoal; g != nil {
			reached := false
			for _, d := range finishedTrials {
				if !d.at.After(ts) && (d.obj == *g || better(d.obj, *g, t.objType)) {
					reached = true
				}
			}
			if reached {
				break
			}
		}
		tr := &training{tuning: t, v: em.Training{
			TrainingID: s.newID(), TrainingName: fmt.Sprintf("%s-trial-%d", t.v.HyperparameterTuningName, i+1),
			ExperimentID: t.v.ExperimentID, HyperparameterTuningID: t.v.HyperparameterTuningID,
			ImageID: t.v.ImageID, FlavorID: t.v.FlavorID, AlgorithmID: t.v.AlgorithmID,
			DistributedNodeCount: t.v.DistributedNodeCount, ModelUploadURI: t.v.ModelUploadURI,
			TimeoutHours: t.v.TimeoutHours, DatasetList: t.v.DatasetList, HyperparameterList: sm.trial(i),
			CreatedDatetime: ts,
		}}
		head := schedule(ts, time.Duration(0), em.StatusCreateInProgress, 10*time.Second, em.StatusRunning)
		var trialEnd time.Time
		if failAll {
			trialEnd = ts.Add(time.Minute)
			tr.reason = fmt.Sprintf("trial process exited with code 1 (simulated: the tuning name contains %q)", FailTuneTrigger)
			tr.tl = append(head, phase{trialEnd.Add(-stopDuration), em.StatusFailTrainInProgress}, phase{trialEnd, em.StatusFailTrain})
			failed++
		} else {
			q := quality(s.env.Seed, tr.v.HyperparameterList, sm.position)
			q = math.Min(1, q*0.95+0.05*hash01(s.env.Seed, "noise", fmt.Sprint(tr.v.HyperparameterList)))
			tr.v.MetricList = metricValues(s.env.Seed, t.v.MetricList, t.objective, t.objType, q)
			obj, _ := metricValue(tr.v.MetricList, t.objective)
			esAt := ts.Add(esOffset)
			var prior []float64
			for _, d := range finishedTrials {
				if !d.at.After(esAt) {
					prior = append(prior, d.obj)
				}
			}
			if len(prior) >= t.v.EarlyStoppingMinTrialCount && better(median(prior), obj, t.objType) {
				trialEnd = esAt
				tr.trial, tr.reason = trialEarlyStopped, "early stopped by MEDIAN"
				tr.tl = append(head, phase{esAt, em.StatusStopped})
			} else {
				trialEnd = ts.Add(trialDuration)
				tr.tl = append(head, phase{trialEnd.Add(-stopDuration), em.StatusCompleteInProgress}, phase{trialEnd, em.StatusComplete})
				finishedTrials = append(finishedTrials, done{trialEnd, obj})
			}
			tr.metricsFrom = trialEnd
		}
		slots[k] = trialEnd
		if trialEnd.After(end) {
			end = trialEnd
		}
		t.trials = append(t.trials, tr)
		s.trainings = append(s.trainings, tr)
		if t.v.MaxFailedTrialCount > 0 && failed >= t.v.MaxFailedTrialCount {
			reason = fmt.Sprintf("%d trials failed (max_failed_trial_count %d)", failed, t.v.MaxFailedTrialCount)
			break
		}
	}
	if reason == "" && len(finishedTrials) == 0 {
		reason = "no trial completed"
	}
	return end, reason
}

func hashString(v string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(v))
	return h.Sum64()
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func (s *Service) listTunings(w http.ResponseWriter, r *http.Request) error {
	exp := r.URL.Query().Get("experimentId")
	return s.all.tunings.list(w, r, func(t *tuning) bool { return exp == "" || t.v.ExperimentID == exp })
}

// stopTuning stops the tuning and its running trials; trials not started
// are dropped.
func (s *Service) stopTuning(w http.ResponseWriter, r *http.Request, id string) error {
	t, err := s.all.tunings.lookup(id)
	if err != nil {
		return err
	}
	now := s.now()
	stopped, err := s.all.tunings.stopped(id, t.tl, now)
	if err != nil {
		return err
	}
	kept := t.trials[:0]
	for _, tr := range t.trials {
		ts := tr.tl.at(now)
		switch {
		case ts == "":
			s.all.trainings.remove(tr)
			continue
		case !finished(ts):
			tr.tl = tr.tl.stopping(now)
			tr.reason, tr.metricsFrom, tr.trial = "stopped with the tuning", time.Time{}, ""
		}
		kept = append(kept, tr)
	}
	t.trials = kept
	t.tl, t.reason = stopped, "stopped by request"
	s.all.tunings.answer(w, http.StatusOK, t)
	return nil
}

func (s *Service) deleteTuning(w http.ResponseWriter, r *http.Request, id string) error {
	t, err := s.all.tunings.lookup(id)
	if err != nil {
		return err
	}
	if err := s.all.tunings.deletable(id, t.tl, s.now()); err != nil {
		return err
	}
	for _, tr := range t.trials {
		s.all.trainings.remove(tr)
	}
	s.all.tunings.remove(t)
	writeOK(w, http.StatusOK, "", nil)
	return nil
}
