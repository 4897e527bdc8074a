package easymaker

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

// Simulated durations of models, endpoints and stages.
const (
	modelReady    = 30 * time.Second
	endpointReady = 2 * time.Minute
	stageReady    = 2*time.Minute + 30*time.Second
	// DefaultStageName is the name of the stage an endpoint is created with.
	DefaultStageName = "default"
)

type model struct {
	v  em.Model
	tl timeline
}

type endpoint struct {
	v  em.Endpoint
	tl timeline
}

type stage struct {
	v  em.EndpointStage
	tl timeline
}

func (s *Service) modelView(m *model) em.Model {
	v := m.v
	v.ModelStatusCode, v.UpdatedDatetime = m.tl.state(s.now())
	return v
}

func (s *Service) imageFramework(id string) string {
	for _, i := range s.images {
		if i.ImageID == id {
			return i.FrameworkCode
		}
	}
	return ""
}

func (s *Service) createModel(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeRequest[em.CreateModelRequest](r)
	if err != nil {
		return err
	}
	for _, m := range s.models {
		if m.v.ModelName == req.ModelName {
			return errf(http.StatusConflict, codeConflict, "a model named %q already exists (%s)", req.ModelName, m.v.ModelID)
		}
	}
	now := s.now()
	m := &model{v: em.Model{ModelID: s.newID(), ModelName: req.ModelName, ModelDescription: req.ModelDescription,
		TagList: req.TagList, CreatedDatetime: now}}
	switch {
	case req.TrainingID != "":
		t := s.all.trainings.find(req.TrainingID)
		if t == nil {
			return errf(http.StatusBadRequest, codeInvalid, "invalid request: training_id: training %s does not exist", req.TrainingID)
		}
		if st := t.tl.at(now); st != em.StatusComplete {
			return errf(http.StatusBadRequest, codeInvalid, "training %s is %s; a model needs a COMPLETE training", req.TrainingID, st)
		}
		m.v.TrainingID, m.v.ModelURI, m.v.FrameworkCode = t.v.TrainingID, t.v.ModelUploadURI, s.imageFramework(t.v.ImageID)
	case req.HyperparameterTuningID != "":
		t := s.all.tunings.find(req.HyperparameterTuningID)
		if t == nil {
			return errf(http.StatusBadRequest, codeInvalid, "invalid request: hyperparameter_tuning_id: hyperparameter tuning %s does not exist", req.HyperparameterTuningID)
		}
		view := s.tuningView(t)
		if view.HyperparameterTuningStatusCode != em.StatusComplete || view.BestTrainingID == "" {
			return errf(http.StatusBadRequest, codeInvalid, "hyperparameter tuning %s is %s; a model needs a COMPLETE tuning with a best training",
				req.HyperparameterTuningID, view.HyperparameterTuningStatusCode)
		}
		m.v.HyperparameterTuningID, m.v.TrainingID = t.v.HyperparameterTuningID, view.BestTrainingID
		m.v.ModelURI = strings.TrimRight(t.v.ModelUploadURI, "/") + "/" + view.BestTrainingID
		m.v.FrameworkCode = s.imageFramework(t.v.ImageID)
	default:
		m.v.ModelURI, m.v.FrameworkCode = req.ModelURI, req.FrameworkCode
	}
	m.tl = schedule(now, time.Duration(0), em.StatusCreateRequested, 5*time.Second, em.StatusCreateInProgress, modelReady, em.StatusActive)
	s.models = append(s.models, m)
	writeOK(w, http.StatusCreated, "model", s.modelView(m))
	return nil
}

// deleteModel refuses while a stage serves the model or a batch inference
// that has not finished uses it.
func (s *Service) deleteModel(w http.ResponseWriter, r *http.Request, id string) error {
	m, err := s.all.models.lookup(id)
	if err != nil {
		return err
	}
	for _, st := range s.stages {
		if _, ok := st.v.ResourceURI(id); ok {
			return errf(http.StatusConflict, codeConflict, "model %s is served by endpoint stage %s; delete the stage or endpoint first", id, st.v.EndpointStageID)
		}
	}
	for _, b := range s.batches {
		if b.v.ModelID == id && !finished(b.tl.at(s.now())) {
			return errf(http.StatusConflict, codeConflict, "model %s is used by batch inference %s", id, b.v.BatchInferenceID)
		}
	}
	s.all.models.remove(m)
	writeOK(w, http.StatusOK, "", nil)
	return nil
}

// checkModels checks that every model of a resource list exists and is
// ACTIVE, and returns the endpoint models for it.
func (s *Service) checkModels(rs []em.ModelResource) ([]em.EndpointModel, error) {
	var bad []string
	out := make([]em.EndpointModel, 0, len(rs))
	for i, res := range rs {
		m := s.all.models.find(res.ModelID)
		switch {
		case m == nil:
			bad = append(bad, fmt.Sprintf("endpoint_model_resource_list[%d].modelId: model %s does not exist", i, res.ModelID))
			continue
		case m.tl.at(s.now()) != em.StatusActive:
			bad = append(bad, fmt.Sprintf("endpoint_model_resource_list[%d].modelId: model %s is %s, not ACTIVE", i, res.ModelID, m.tl.at(s.now())))
			continue
		}
		out = append(out, em.EndpointModel{EndpointModelID: s.newID(), ModelID: m.v.ModelID, ModelName: m.v.ModelName,
			APIGWResourceURI: res.APIGWResourceURI, PodCount: res.PodCount, Description: res.Description})
	}
	if len(bad) > 0 {
		return nil, errf(http.StatusBadRequest, codeInvalid, "invalid request: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

// baseURL is where this service is reached, for the stages' apigwStageUrl.
func (s *Service) baseURL(r *http.Request) string {
	if s.env.URL != nil {
		if u := s.env.URL("easymaker"); u != "" {
			return u
		}
	}
	return "http://" + r.Host
}

func (s *Service) newStage(r *http.Request, endpointID, name, desc, flavorID string, count int, models []em.EndpointModel,
	tags []em.Tag, useLog, isDefault bool, now time.Time) *stage {
	if count == 0 {
		count = 1
	}
	id := s.newID()
	for i := range models {
		models[i].EndpointStageID = id
	}
	st := &stage{v: em.EndpointStage{EndpointStageID: id, EndpointStageName: name, EndpointStageDescription: desc,
		EndpointID: endpointID, DefaultStage: isDefault, APIGWStageURL: s.baseURL(r) + "/_stage/" + id,
		FlavorID: flavorID, EndpointInstanceCount: count, EndpointModelList: models, TagList: tags, UseLog: useLog,
		CreatedDatetime: now}}
	st.tl = schedule(now, time.Duration(0), em.StatusCreateRequested, 10*time.Second, em.StatusDeployInProgress, stageReady, em.StatusActive)
	s.stages = append(s.stages, st)
	return st
}

func (s *Service) stageView(st *stage) em.EndpointStage {
	now := s.now()
	v := st.v
	v.EndpointStageStatusCode, v.UpdatedDatetime = st.tl.state(now)
	v.EndpointModelList = make([]em.EndpointModel, len(st.v.EndpointModelList))
	for i, m := range st.v.EndpointModelList {
		m.EndpointModelStatusCode = v.EndpointStageStatusCode
		v.EndpointModelList[i] = m
	}
	return v
}

func (s *Service) endpointView(e *endpoint) em.Endpoint {
	v := e.v
	v.EndpointStatusCode, v.UpdatedDatetime = e.tl.state(s.now())
	return v
}

func (s *Service) createEndpoint(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeRequest[em.CreateEndpointRequest](r)
	if err != nil {
		return err
	}
	if !s.flavor(req.FlavorID) {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: flavor_id: instance type %s does not exist", req.FlavorID)
	}
	for _, e := range s.endpoints {
		if e.v.EndpointName == req.EndpointName {
			return errf(http.StatusConflict, codeConflict, "an endpoint named %q already exists (%s)", req.EndpointName, e.v.EndpointID)
		}
	}
	models, err := s.checkModels(req.EndpointModelResourceList)
	if err != nil {
		return err
	}
	now := s.now()
	e := &endpoint{v: em.Endpoint{EndpointID: s.newID(), EndpointName: req.EndpointName, EndpointDescription: req.EndpointDescription,
		TagList: req.TagList, UseLog: req.UseLog, CreatedDatetime: now}}
	e.tl = schedule(now, time.Duration(0), em.StatusCreateRequested, 10*time.Second, em.StatusCreateInProgress, endpointReady, em.StatusActive)
	st := s.newStage(r, e.v.EndpointID, DefaultStageName, req.EndpointDescription, req.FlavorID, req.EndpointInstanceCount,
		models, req.TagList, req.UseLog, true, now)
	e.v.DefaultEndpointStageID = st.v.EndpointStageID
	s.endpoints = append(s.endpoints, e)
	writeOK(w, http.StatusCreated, "endpoint", s.endpointView(e))
	return nil
}

// deleteEndpoint removes the endpoint with every stage.
func (s *Service) deleteEndpoint(w http.ResponseWriter, r *http.Request, id string) error {
	e, err := s.all.endpoints.lookup(id)
	if err != nil {
		return err
	}
	kept := s.stages[:0]
	for _, st := range s.stages {
		if st.v.EndpointID != id {
			kept = append(kept, st)
		}
	}
	s.stages = kept
	s.all.endpoints.remove(e)
	writeOK(w, http.StatusOK, "", nil)
	return nil
}

func (s *Service) createStage(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeRequest[em.CreateStageRequest](r)
	if err != nil {
		return err
	}
	e := s.all.endpoints.find(req.EndpointID)
	if e == nil {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: endpoint_id: endpoint %s does not exist", req.EndpointID)
	}
	if st := e.tl.at(s.now()); st != em.StatusActive {
		return errf(http.StatusBadRequest, codeInProgress, "endpoint %s is %s; stages can be added when it is ACTIVE", req.EndpointID, st)
	}
	if !s.flavor(req.FlavorID) {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: flavor_id: instance type %s does not exist", req.FlavorID)
	}
	for _, st := range s.stages {
		if st.v.EndpointID == req.EndpointID && st.v.EndpointStageName == req.EndpointStageName {
			return errf(http.StatusConflict, codeConflict, "endpoint %s already has a stage named %q (%s)", req.EndpointID, req.EndpointStageName, st.v.EndpointStageID)
		}
	}
	models, err := s.checkModels(req.EndpointModelResourceList)
	if err != nil {
		return err
	}
	st := s.newStage(r, req.EndpointID, req.EndpointStageName, req.EndpointStageDescription, req.FlavorID,
		req.EndpointInstanceCount, models, req.TagList, req.UseLog, false, s.now())
	writeOK(w, http.StatusCreated, "endpointStage", s.stageView(st))
	return nil
}

// listStages needs ?endpointId=.
func (s *Service) listStages(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("endpointId")
	if id == "" {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: endpointId is required")
	}
	if _, err := s.all.endpoints.lookup(id); err != nil {
		return err
	}
	return s.all.stages.list(w, r, func(st *stage) bool { return st.v.EndpointID == id })
}

// deleteStage refuses the default stage (it goes with its endpoint).
func (s *Service) deleteStage(w http.ResponseWriter, r *http.Request, id string) error {
	st, err := s.all.stages.lookup(id)
	if err != nil {
		return err
	}
	if st.v.DefaultStage {
		return errf(http.StatusBadRequest, codeInvalid, "endpoint stage %s is the default stage of endpoint %s; delete the endpoint instead", id, st.v.EndpointID)
	}
	s.all.stages.remove(st)
	writeOK(w, http.StatusOK, "", nil)
	return nil
}

// listEndpointModels needs ?endpointStageId=.
func (s *Service) listEndpointModels(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("endpointStageId")
	if id == "" {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: endpointStageId is required")
	}
	st, err := s.all.stages.lookup(id)
	if err != nil {
		return err
	}
	writeList(w, r, "endpointModel", s.stageView(st).EndpointModelList)
	return nil
}

func (s *Service) getEndpointModel(w http.ResponseWriter, r *http.Request, id string) error {
	for _, st := range s.stages {
		for _, m := range s.stageView(st).EndpointModelList {
			if m.EndpointModelID == id {
				writeOK(w, http.StatusOK, "endpointModel", m)
				return nil
			}
		}
	}
	return notFound("endpoint model", id)
}
