package easymaker

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/sim"
)

// predict serves POST /_stage/{stageId}{apigwResourceUri}: the model
// server behind a stage's apigwStageUrl. No authentication, as on the
// real API gateway. Answers are the model server's raw JSON
// ({"predictions": [...]}, or {"error": "..."}), not the envelope.
func (s *Service) predict(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/_stage/")
	stageID, uri, _ := strings.Cut(rest, "/")
	uri = "/" + strings.TrimRight(uri, "/")
	if r.Method != http.MethodPost {
		sim.WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use POST"})
		return
	}
	s.mu.Lock()
	st := s.all.stages.find(stageID)
	var view em.EndpointStage
	if st != nil {
		view = s.stageView(st)
	}
	seed := s.env.Seed
	s.mu.Unlock()
	if st == nil {
		sim.WriteJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no stage %s", stageID)})
		return
	}
	if view.EndpointStageStatusCode != em.StatusActive {
		sim.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf("stage %s is %s", stageID, view.EndpointStageStatusCode)})
		return
	}
	var modelID string
	for _, m := range view.EndpointModelList {
		if strings.TrimRight(m.APIGWResourceURI, "/") == uri || (m.APIGWResourceURI == "/" && uri == "/") {
			modelID = m.ModelID
		}
	}
	if modelID == "" {
		sim.WriteJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("stage %s serves no model at %s", stageID, uri)})
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		sim.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	instances, err := parseInstances(raw)
	if err != nil {
		sim.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	sim.WriteJSON(w, http.StatusOK, map[string]any{"predictions": predictAll(seed, modelID, instances)})
}

// parseInstances reads {"instances": [[numbers], ...]}.
func parseInstances(raw []byte) ([][]float64, error) {
	var body struct {
		Instances *[]json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("the body must be JSON {\"instances\": [[numbers], ...]}: %v", err)
	}
	if body.Instances == nil {
		return nil, fmt.Errorf("the body has no \"instances\"; send {\"instances\": [[numbers], ...]}")
	}
	out := make([][]float64, 0, len(*body.Instances))
	for i, in := range *body.Instances {
		var xs []float64
		if err := json.Unmarshal(in, &xs); err != nil {
			return nil, fmt.Errorf("instances[%d] must be an array of numbers", i)
		}
		out = append(out, xs)
	}
	return out, nil
}

// Predict is the simulated model: a fixed linear function of the inputs
// per model, y = b + sum(w_j * x_j), with b in [0, 1) and w_j in [-1, 1)
// drawn from the seed and the model ID; rounded to 6 decimals.
func Predict(seed uint64, modelID string, x []float64) float64 {
	y := hash01(seed, modelID, "bias")
	for j, v := range x {
		y += (2*hash01(seed, modelID, fmt.Sprint(j)) - 1) * v
	}
	return math.Round(y*1e6) / 1e6
}

func predictAll(seed uint64, modelID string, instances [][]float64) []float64 {
	out := make([]float64, len(instances))
	for i, x := range instances {
		out[i] = Predict(seed, modelID, x)
	}
	return out
}
