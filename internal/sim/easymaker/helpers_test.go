package easymaker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/sim"
	simem "github.com/runbook/runbook/internal/sim/easymaker"
)

type env struct {
	t      *testing.T
	srv    *sim.Server
	conn   map[string]any
	svc    *simem.Service
	client *em.Client
	ctx    context.Context
}

func start(t *testing.T) *env {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{
		Services: []string{"easymaker"},
		Start:    time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	conn := s.Connections()["easymaker"]
	cfg, err := em.ConfigFrom(conn)
	require.NoError(t, err)
	c, err := em.New(cfg)
	require.NoError(t, err)
	return &env{t: t, srv: s, conn: conn, svc: s.Service("easymaker").(*simem.Service), client: c, ctx: context.Background()}
}

func (e *env) advance(d time.Duration) { e.srv.Clock.Advance(d) }

type response struct {
	status int
	body   map[string]any
	raw    string
}

func (r response) header() map[string]any {
	h, _ := r.body["header"].(map[string]any)
	return h
}

// do sends a request below /v1.0/appkeys/{appkey} with the secret key;
// hdr pairs override headers ("" removes one).
func (e *env) do(method, path string, body any, hdr ...string) response {
	e.t.Helper()
	return e.raw(method, e.conn["base_url"].(string)+"/v1.0/appkeys/"+e.svc.AppKey()+path, body,
		append([]string{em.HeaderSecretKey, e.svc.SecretKey()}, hdr...)...)
}

func (e *env) raw(method, url string, body any, hdr ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = bytes.NewBufferString(s)
		} else {
			b, err := json.Marshal(body)
			require.NoError(e.t, err)
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	out := response{status: resp.StatusCode, raw: string(b)}
	_ = json.Unmarshal(b, &out.body)
	return out
}

// experiment returns an ACTIVE experiment.
func (e *env) experiment(name string) string {
	e.t.Helper()
	x, err := e.client.CreateExperiment(e.ctx, em.CreateExperimentRequest{ExperimentName: name})
	require.NoError(e.t, err)
	e.advance(time.Minute)
	return x.ExperimentID
}

const (
	flavorID = "flv-00000000-0001"
	imageID  = "img-00000000-0003"
	algoID   = "alg-00000000-0001"
	modelURI = "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_t/models/m"
)

func f64(v float64) *float64 { return &v }

func (e *env) tuning(req em.CreateTuningRequest) *em.HyperparameterTuning {
	e.t.Helper()
	if req.ExperimentID == "" {
		req.ExperimentID = e.experiment("exp-" + req.HyperparameterTuningName)
	}
	req.ImageID, req.FlavorID, req.ModelUploadURI = imageID, flavorID, modelURI
	if req.AlgorithmID == "" && req.SourceDirURI == "" {
		req.AlgorithmID = algoID
	}
	if req.DistributedNodeCount == 0 {
		req.DistributedNodeCount = 1
	}
	if req.ParallelTrialCount == 0 {
		req.ParallelTrialCount = 2
	}
	if req.TuningStrategyName == "" {
		req.TuningStrategyName = em.StrategyBayesian
	}
	req.EarlyStoppingAlgorithm = em.EarlyStoppingMedian
	if req.HyperparameterSpecList == nil {
		req.HyperparameterSpecList = []em.HyperparameterSpec{
			{HyperparameterName: "lr", HyperparameterTypeCode: em.HyperparameterTypeFloat, HyperparameterMinValue: f64(0.001), HyperparameterMaxValue: f64(0.1)},
			{HyperparameterName: "epochs", HyperparameterTypeCode: em.HyperparameterTypeInt, HyperparameterMinValue: f64(1), HyperparameterMaxValue: f64(20)},
			{HyperparameterName: "optimizer", HyperparameterTypeCode: em.HyperparameterTypeCat, HyperparameterSpecifiedValues: "adam, sgd, rmsprop"},
		}
	}
	t, err := e.client.CreateTuning(e.ctx, req)
	require.NoError(e.t, err)
	return t
}
