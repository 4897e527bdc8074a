package easymaker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// pageLimit is the page size list calls ask for.
const pageLimit = 100

// list reads every page of a list: GET path?page=N&limit=100, items under
// key+"List", until the items read reach paging.totalCount or a page comes
// back short. An answer without paging is one complete page.
func list[T any](ctx context.Context, c *Client, path string, q url.Values, key string) ([]T, error) {
	if q == nil {
		q = url.Values{}
	}
	var out []T
	for page := 1; ; page++ {
		q.Set("page", strconv.Itoa(page))
		q.Set("limit", strconv.Itoa(pageLimit))
		raw, err := c.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, decodeErr(path, err)
		}
		var items []T
		if v, ok := m[key+"List"]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, decodeErr(path, err)
			}
		}
		out = append(out, items...)
		var paging *Paging
		if v, ok := m["paging"]; ok {
			_ = json.Unmarshal(v, &paging)
		}
		if paging == nil || paging.TotalCount <= len(out) || len(items) == 0 || len(items) < pageLimit {
			return out, nil
		}
	}
}

func get[T any](ctx context.Context, c *Client, path, key string) (*T, error) {
	var v T
	if err := c.call(ctx, http.MethodGet, path, nil, key, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func create[T any](ctx context.Context, c *Client, path string, in any, key string) (*T, error) {
	var v T
	if err := c.call(ctx, http.MethodPost, path, in, key, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func (c *Client) del(ctx context.Context, path string) error {
	_, err := c.do(ctx, http.MethodDelete, path, nil)
	return err
}

func (c *Client) stop(ctx context.Context, path string) error {
	_, err := c.do(ctx, http.MethodPut, path+"/stop", nil)
	return err
}

func idPath(collection, id string) (string, error) {
	if err := checkID(collection, id); err != nil {
		return "", err
	}
	return "/" + collection + "/" + url.PathEscape(id), nil
}

// byName returns the item named name that was created last (nil: none).
// Names are not unique for every resource, so reconcile adopts the newest.
func byName[T any](items []T, name string, nameOf func(*T) string, created func(*T) time.Time) *T {
	var best *T
	for i := range items {
		it := &items[i]
		if nameOf(it) != name {
			continue
		}
		if best == nil || created(it).After(created(best)) {
			best = it
		}
	}
	return best
}

// ListFlavors lists the instance types (GET /flavors).
func (c *Client) ListFlavors(ctx context.Context) ([]Flavor, error) {
	return list[Flavor](ctx, c, "/flavors", nil, "flavor")
}

// ListImages lists the images (GET /images).
func (c *Client) ListImages(ctx context.Context) ([]Image, error) {
	return list[Image](ctx, c, "/images", nil, "image")
}

// ListAlgorithms lists the provided algorithms (GET /algorithms).
func (c *Client) ListAlgorithms(ctx context.Context) ([]Algorithm, error) {
	return list[Algorithm](ctx, c, "/algorithms", nil, "algorithm")
}

// CreateExperiment creates an experiment (POST /experiments). The service
// answers the existing experiment when the name is taken.
func (c *Client) CreateExperiment(ctx context.Context, r CreateExperimentRequest) (*Experiment, error) {
	return create[Experiment](ctx, c, "/experiments", r, "experiment")
}

// GetExperiment reads an experiment.
func (c *Client) GetExperiment(ctx context.Context, id string) (*Experiment, error) {
	p, err := idPath("experiments", id)
	if err != nil {
		return nil, err
	}
	return get[Experiment](ctx, c, p, "experiment")
}

// ListExperiments lists the experiments.
func (c *Client) ListExperiments(ctx context.Context) ([]Experiment, error) {
	return list[Experiment](ctx, c, "/experiments", nil, "experiment")
}

// DeleteExperiment deletes an experiment; the service refuses (409) while
// it holds trainings or tunings.
func (c *Client) DeleteExperiment(ctx context.Context, id string) error {
	p, err := idPath("experiments", id)
	if err != nil {
		return err
	}
	return c.del(ctx, p)
}

// FindExperimentByName returns the experiment named name (nil, nil: none).
func (c *Client) FindExperimentByName(ctx context.Context, name string) (*Experiment, error) {
	items, err := c.ListExperiments(ctx)
	if err != nil {
		return nil, err
	}
	return byName(items, name, func(e *Experiment) string { return e.ExperimentName },
		func(e *Experiment) time.Time { return e.CreatedDatetime }), nil
}

// CreateTraining starts a training (POST /trainings).
func (c *Client) CreateTraining(ctx context.Context, r CreateTrainingRequest) (*Training, error) {
	return create[Training](ctx, c, "/trainings", r, "training")
}

// GetTraining reads a training (a tuning's trials included).
func (c *Client) GetTraining(ctx context.Context, id string) (*Training, error) {
	p, err := idPath("trainings", id)
	if err != nil {
		return nil, err
	}
	return get[Training](ctx, c, p, "training")
}

// ListTrainings lists the trainings; experimentID != "" keeps those of one
// experiment.
func (c *Client) ListTrainings(ctx context.Context, experimentID string) ([]Training, error) {
	q := url.Values{}
	if experimentID != "" {
		q.Set("experimentId", experimentID)
	}
	return list[Training](ctx, c, "/trainings", q, "training")
}

// StopTraining stops a training (PUT /trainings/{id}/stop).
func (c *Client) StopTraining(ctx context.Context, id string) error {
	p, err := idPath("trainings", id)
	if err != nil {
		return err
	}
	return c.stop(ctx, p)
}

// DeleteTraining deletes a training.
func (c *Client) DeleteTraining(ctx context.Context, id string) error {
	p, err := idPath("trainings", id)
	if err != nil {
		return err
	}
	return c.del(ctx, p)
}

// FindTrainingByName returns the newest training named name in the
// experiment (experimentID "" : any), or nil, nil.
func (c *Client) FindTrainingByName(ctx context.Context, experimentID, name string) (*Training, error) {
	items, err := c.ListTrainings(ctx, experimentID)
	if err != nil {
		return nil, err
	}
	return byName(items, name, func(t *Training) string { return t.TrainingName },
		func(t *Training) time.Time { return t.CreatedDatetime }), nil
}

// CreateTuning starts a hyperparameter tuning (POST /hyperparameter-tunings).
func (c *Client) CreateTuning(ctx context.Context, r CreateTuningRequest) (*HyperparameterTuning, error) {
	return create[HyperparameterTuning](ctx, c, "/hyperparameter-tunings", r, "hyperparameterTuning")
}

// GetTuning reads a tuning with its trials and, once finished, its best
// training.
func (c *Client) GetTuning(ctx context.Context, id string) (*HyperparameterTuning, error) {
	p, err := idPath("hyperparameter-tunings", id)
	if err != nil {
		return nil, err
	}
	return get[HyperparameterTuning](ctx, c, p, "hyperparameterTuning")
}

// ListTunings lists the tunings; experimentID != "" keeps one experiment's.
func (c *Client) ListTunings(ctx context.Context, experimentID string) ([]HyperparameterTuning, error) {
	q := url.Values{}
	if experimentID != "" {
		q.Set("experimentId", experimentID)
	}
	return list[HyperparameterTuning](ctx, c, "/hyperparameter-tunings", q, "hyperparameterTuning")
}

// StopTuning stops a tuning and its running trials.
func (c *Client) StopTuning(ctx context.Context, id string) error {
	p, err := idPath("hyperparameter-tunings", id)
	if err != nil {
		return err
	}
	return c.stop(ctx, p)
}

// DeleteTuning deletes a tuning.
func (c *Client) DeleteTuning(ctx context.Context, id string) error {
	p, err := idPath("hyperparameter-tunings", id)
	if err != nil {
		return err
	}
	return c.del(ctx, p)
}

// FindTuningByName returns the newest tuning named name in the experiment
// (experimentID "": any), or nil, nil.
func (c *Client) FindTuningByName(ctx context.Context, experimentID, name string) (*HyperparameterTuning, error) {
	items, err := c.ListTunings(ctx, experimentID)
	if err != nil {
		return nil, err
	}
	return byName(items, name, func(t *HyperparameterTuning) string { return t.HyperparameterTuningName },
		func(t *HyperparameterTuning) time.Time { return t.CreatedDatetime }), nil
}

// CreateModel registers a model (POST /models).
func (c *Client) CreateModel(ctx context.Context, r CreateModelRequest) (*Model, error) {
	return create[Model](ctx, c, "/models", r, "model")
}

// GetModel reads a model.
func (c *Client) GetModel(ctx context.Context, id string) (*Model, error) {
	p, err := idPath("models", id)
	if err != nil {
		return nil, err
	}
	return get[Model](ctx, c, p, "model")
}

// ListModels lists the models.
func (c *Client) ListModels(ctx context.Context) ([]Model, error) {
	return list[Model](ctx, c, "/models", nil, "model")
}

// DeleteModel deletes a model; refused (409) while a stage serves it.
func (c *Client) DeleteModel(ctx context.Context, id string) error {
	p, err := idPath("models", id)
	if err != nil {
		return err
	}
	return c.del(ctx, p)
}

// FindModelByName returns the newest model named name, or nil, nil. Batch
// inference takes a model name in the SDK: resolve it with this.
func (c *Client) FindModelByName(ctx context.Context, name string) (*Model, error) {
	items, err := c.ListModels(ctx)
	if err != nil {
		return nil, err
	}
	return byName(items, name, func(m *Model) string { return m.ModelName },
		func(m *Model) time.Time { return m.CreatedDatetime }), nil
}

// CreateEndpoint creates an endpoint and its default stage (POST /endpoints).
func (c *Client) CreateEndpoint(ctx context.Context, r CreateEndpointRequest) (*Endpoint, error) {
	return create[Endpoint](ctx, c, "/endpoints", r, "endpoint")
}

// GetEndpoint reads an endpoint.
func (c *Client) GetEndpoint(ctx context.Context, id string) (*Endpoint, error) {
	p, err := idPath("endpoints", id)
	if err != nil {
		return nil, err
	}
	return get[Endpoint](ctx, c, p, "endpoint")
}

// ListEndpoints lists the endpoints.
func (c *Client) ListEndpoints(ctx context.Context) ([]Endpoint, error) {
	return list[Endpoint](ctx, c, "/endpoints", nil, "endpoint")
}

// DeleteEndpoint deletes an endpoint with its stages.
func (c *Client) DeleteEndpoint(ctx context.Context, id string) error {
	p, err := idPath("endpoints", id)
	if err != nil {
		return err
	}
	return c.del(ctx, p)
}

// FindEndpointByName returns the newest endpoint named name, or nil, nil.
func (c *Client) FindEndpointByName(ctx context.Context, name string) (*Endpoint, error) {
	items, err := c.ListEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	return byName(items, name, func(e *Endpoint) string { return e.EndpointName },
		func(e *Endpoint) time.Time { return e.CreatedDatetime }), nil
}

// CreateStage adds a stage to an endpoint (POST /endpoint-stages).
func (c *Client) CreateStage(ctx context.Context, r CreateStageRequest) (*EndpointStage, error) {
	return create[EndpointStage](ctx, c, "/endpoint-stages", r, "endpointStage")
}

// GetStage reads a stage.
func (c *Client) GetStage(ctx context.Context, id string) (*EndpointStage, error) {
	p, err := idPath("endpoint-stages", id)
	if err != nil {
		return nil, err
	}
	return get[EndpointStage](ctx, c, p, "endpointStage")
}

// ListStages lists the stages of an endpoint (GET /endpoint-stages?endpointId=).
func (c *Client) ListStages(ctx context.Context, endpointID string) ([]EndpointStage, error) {
	if err := checkID("endpoint ID", endpointID); err != nil {
		return nil, err
	}
	return list[EndpointStage](ctx, c, "/endpoint-stages", url.Values{"endpointId": {endpointID}}, "endpointStage")
}

// DefaultStage returns the default stage of an endpoint
// (Endpoint().get_default_endpoint_stage).
func (c *Client) DefaultStage(ctx context.Context, endpointID string) (*EndpointStage, error) {
	stages, err := c.ListStages(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	for i := range stages {
		if stages[i].DefaultStage {
			return &stages[i], nil
		}
	}
	return nil, notFound("endpoint %s has no default stage", endpointID)
}

// DeleteStage deletes a stage; the default stage goes only with its
// endpoint (the service answers 400).
func (c *Client) DeleteStage(ctx context.Context, id string) error {
	p, err := idPath("endpoint-stages", id)
	if err != nil {
		return err
	}
	return c.del(ctx, p)
}

// FindStageByName returns the newest stage of the endpoint named name, or
// nil, nil.
func (c *Client) FindStageByName(ctx context.Context, endpointID, name string) (*EndpointStage, error) {
	items, err := c.ListStages(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	return byName(items, name, func(s *EndpointStage) string { return s.EndpointStageName },
		func(s *EndpointStage) time.Time { return s.CreatedDatetime }), nil
}

// ListEndpointModels lists the models a stage serves
// (GET /endpoint-models?endpointStageId=).
func (c *Client) ListEndpointModels(ctx context.Context, stageID string) ([]EndpointModel, error) {
	if err := checkID("stage ID", stageID); err != nil {
		return nil, err
	}
	return list[EndpointModel](ctx, c, "/endpoint-models", url.Values{"endpointStageId": {stageID}}, "endpointModel")
}

// GetEndpointModel reads one endpoint model.
func (c *Client) GetEndpointModel(ctx context.Context, id string) (*EndpointModel, error) {
	p, err := idPath("endpoint-models", id)
	if err != nil {
		return nil, err
	}
	return get[EndpointModel](ctx, c, p, "endpointModel")
}

// CreateBatchInference starts a batch inference (POST /batch-inferences).
func (c *Client) CreateBatchInference(ctx context.Context, r CreateBatchInferenceRequest) (*BatchInference, error) {
	return create[BatchInference](ctx, c, "/batch-inferences", r, "batchInference")
}

// GetBatchInference reads a batch inference.
func (c *Client) GetBatchInference(ctx context.Context, id string) (*BatchInference, error) {
	p, err := idPath("batch-inferences", id)
	if err != nil {
		return nil, err
	}
	return get[BatchInference](ctx, c, p, "batchInference")
}

// ListBatchInferences lists the batch inferences.
func (c *Client) ListBatchInferences(ctx context.Context) ([]BatchInference, error) {
	return list[BatchInference](ctx, c, "/batch-inferences", nil, "batchInference")
}

// StopBatchInference stops a batch inference.
func (c *Client) StopBatchInference(ctx context.Context, id string) error {
	p, err := idPath("batch-inferences", id)
	if err != nil {
		return err
	}
	return c.stop(ctx, p)
}

// DeleteBatchInference deletes a batch inference.
func (c *Client) DeleteBatchInference(ctx context.Context, id string) error {
	p, err := idPath("batch-inferences", id)
	if err != nil {
		return err
	}
	return c.del(ctx, p)
}

// FindBatchInferenceByName returns the newest batch inference named name,
// or nil, nil.
func (c *Client) FindBatchInferenceByName(ctx context.Context, name string) (*BatchInference, error) {
	items, err := c.ListBatchInferences(ctx)
	if err != nil {
		return nil, err
	}
	return byName(items, name, func(b *BatchInference) string { return b.BatchInferenceName },
		func(b *BatchInference) time.Time { return b.CreatedDatetime }), nil
}
