package easymaker

import (
	"net/http"
	"slices"
	"strings"
	"time"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

// collection is one kind of resource of the service as the API's get,
// list and delete see it: where its items are, how a message and the
// envelope name it, an item's ID and its view at the service's time.
type collection[R comparable, V any] struct {
	what  string // in messages: "hyperparameter tuning"
	key   string // the envelope's key: "hyperparameterTuning"
	items *[]R
	id    func(R) string
	view  func(R) V
}

// collections are the service's resources, each over its slice.
type collections struct {
	experiments collection[*experiment, em.Experiment]
	trainings   collection[*training, em.Training]
	tunings     collection[*tuning, em.HyperparameterTuning]
	models      collection[*model, em.Model]
	endpoints   collection[*endpoint, em.Endpoint]
	stages      collection[*stage, em.EndpointStage]
	batches     collection[*batch, em.BatchInference]
}

func (s *Service) collections() collections {
	return collections{
		experiments: collection[*experiment, em.Experiment]{"experiment", "experiment", &s.experiments,
			func(e *experiment) string { return e.v.ExperimentID }, s.experimentView},
		trainings: collection[*training, em.Training]{"training", "training", &s.trainings,
			func(t *training) string { return t.v.TrainingID }, s.trainingView},
		tunings: collection[*tuning, em.HyperparameterTuning]{"hyperparameter tuning", "hyperparameterTuning", &s.tunings,
			func(t *tuning) string { return t.v.HyperparameterTuningID }, s.tuningView},
		models: collection[*model, em.Model]{"model", "model", &s.models,
			func(m *model) string { return m.v.ModelID }, s.modelView},
		endpoints: collection[*endpoint, em.Endpoint]{"endpoint", "endpoint", &s.endpoints,
			func(e *endpoint) string { return e.v.EndpointID }, s.endpointView},
		stages: collection[*stage, em.EndpointStage]{"endpoint stage", "endpointStage", &s.stages,
			func(st *stage) string { return st.v.EndpointStageID }, s.stageView},
		batches: collection[*batch, em.BatchInference]{"batch inference", "batchInference", &s.batches,
			func(b *batch) string { return b.v.BatchInferenceID }, s.batchView},
	}
}

// find returns the item with ID id, or the zero R (nil).
func (c collection[R, V]) find(id string) R {
	for _, x := range *c.items {
		if c.id(x) == id {
			return x
		}
	}
	var none R
	return none
}

// lookup is find answering not found.
func (c collection[R, V]) lookup(id string) (R, error) {
	x := c.find(id)
	var none R
	if x == none {
		return x, notFound(c.what, id)
	}
	return x, nil
}

func (c collection[R, V]) get(w http.ResponseWriter, r *http.Request, id string) error {
	x, err := c.lookup(id)
	if err != nil {
		return err
	}
	c.answer(w, http.StatusOK, x)
	return nil
}

// answer writes x's view in the envelope.
func (c collection[R, V]) answer(w http.ResponseWriter, status int, x R) {
	writeOK(w, status, c.key, c.view(x))
}

// list answers a page of the items keep keeps (every item with a nil
// keep).
func (c collection[R, V]) list(w http.ResponseWriter, r *http.Request, keep func(R) bool) error {
	out := []V{}
	for _, x := range *c.items {
		if keep == nil || keep(x) {
			out = append(out, c.view(x))
		}
	}
	writeList(w, r, c.key, out)
	return nil
}

func (c collection[R, V]) listAll(w http.ResponseWriter, r *http.Request) error {
	return c.list(w, r, nil)
}

func (c collection[R, V]) remove(x R) {
	*c.items = slices.DeleteFunc(*c.items, func(y R) bool { return y == x })
}

// stopped checks that a run (a training, a tuning, a batch inference) in
// its timeline tl can be stopped now, and returns tl stopping from now:
// STOP_IN_PROGRESS, then STOPPED after stopDuration.
func (c collection[R, V]) stopped(id string, tl timeline, now time.Time) (timeline, error) {
	st := tl.at(now)
	if finished(st) || st == em.StatusStopInProgress || strings.HasPrefix(st, "FAIL") {
		return tl, errf(http.StatusBadRequest, codeInProgress, "%s %s cannot be stopped in status %s", c.what, id, st)
	}
	return tl.stopping(now), nil
}

// deletable checks that a run in its timeline tl has finished: a running
// one must be stopped before it is deleted.
func (c collection[R, V]) deletable(id string, tl timeline, now time.Time) error {
	if st := tl.at(now); !finished(st) {
		return errf(http.StatusBadRequest, codeInProgress, "%s %s is %s; stop it before deleting", c.what, id, st)
	}
	return nil
}
