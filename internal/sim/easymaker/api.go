package easymaker

import (
	"net/http"
	"strings"
)

// route is one collection of the API: which methods it has. A nil
// function answers 405.
type route struct {
	list   func(w http.ResponseWriter, r *http.Request) error
	create func(w http.ResponseWriter, r *http.Request) error
	get    func(w http.ResponseWriter, r *http.Request, id string) error
	del    func(w http.ResponseWriter, r *http.Request, id string) error
	stop   func(w http.ResponseWriter, r *http.Request, id string) error
}

func (s *Service) routes() map[string]route {
	return map[string]route{
		"flavors":                {list: s.listFlavors},
		"images":                 {list: s.listImages},
		"algorithms":             {list: s.listAlgorithms},
		"experiments":            {list: s.all.experiments.listAll, create: s.createExperiment, get: s.all.experiments.get, del: s.deleteExperiment},
		"trainings":              {list: s.listTrainings, create: s.createTraining, get: s.all.trainings.get, del: s.deleteTraining, stop: s.stopTraining},
		"hyperparameter-tunings": {list: s.listTunings, create: s.createTuning, get: s.all.tunings.get, del: s.deleteTuning, stop: s.stopTuning},
		"models":                 {list: s.all.models.listAll, create: s.createModel, get: s.all.models.get, del: s.deleteModel},
		"endpoints":              {list: s.all.endpoints.listAll, create: s.createEndpoint, get: s.all.endpoints.get, del: s.deleteEndpoint},
		"endpoint-stages":        {list: s.listStages, create: s.createStage, get: s.all.stages.get, del: s.deleteStage},
		"endpoint-models":        {list: s.listEndpointModels, get: s.getEndpointModel},
		"batch-inferences":       {list: s.all.batches.listAll, create: s.createBatch, get: s.all.batches.get, del: s.deleteBatch, stop: s.stopBatch},
	}
}

// api serves /v1.0/appkeys/{appkey}/{collection}[/{id}[/stop]] under the
// service mutex, after authentication and after applying the transitions
// the clock has reached (tick).
func (s *Service) api(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1.0/appkeys/")
	appKey, rest, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.authorized(r) {
		writeErr(w, errf(http.StatusUnauthorized, codeAuth, "authentication failed: send the appkey's secret key as %s or a token as x-nhn-authorization: Bearer <token>", "X-Secret-Key"))
		return
	}
	if appKey != s.appKey {
		writeErr(w, errf(http.StatusForbidden, codeAuth, "appkey %q is not the appkey of these credentials", appKey))
		return
	}
	s.tick()
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	rt, ok := s.routes()[parts[0]]
	if !ok || len(parts) > 3 || (len(parts) == 3 && parts[2] != "stop") {
		writeErr(w, errf(http.StatusNotFound, codeNotFound, "no such path: %s %s", r.Method, r.URL.Path))
		return
	}
	var err error
	notAllowed := errf(http.StatusMethodNotAllowed, codeInvalid, "method %s is not allowed on %s", r.Method, r.URL.Path)
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet && rt.list != nil:
		err = rt.list(w, r)
	case len(parts) == 1 && r.Method == http.MethodPost && rt.create != nil:
		err = rt.create(w, r)
	case len(parts) == 2 && r.Method == http.MethodGet && rt.get != nil:
		err = rt.get(w, r, parts[1])
	case len(parts) == 2 && r.Method == http.MethodDelete && rt.del != nil:
		err = rt.del(w, r, parts[1])
	case len(parts) == 3 && r.Method == http.MethodPut && rt.stop != nil:
		err = rt.stop(w, r, parts[1])
	default:
		err = notAllowed
	}
	if err != nil {
		writeErr(w, err)
	}
}

func (s *Service) listFlavors(w http.ResponseWriter, r *http.Request) error {
	writeList(w, r, "flavor", s.flavors)
	return nil
}

func (s *Service) listImages(w http.ResponseWriter, r *http.Request) error {
	writeList(w, r, "image", s.images)
	return nil
}

func (s *Service) listAlgorithms(w http.ResponseWriter, r *http.Request) error {
	writeList(w, r, "algorithm", s.algorithms)
	return nil
}
