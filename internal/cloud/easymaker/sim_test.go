package easymaker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	simem "github.com/runbook/runbook/internal/sim/easymaker"
)

type fixture struct {
	srv  *sim.Server
	conn map[string]any
	svc  *simem.Service
}

func start(t *testing.T) *fixture {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{
		Services: []string{"easymaker"},
		Start:    time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return &fixture{srv: s, conn: s.Connections()["easymaker"], svc: s.Service("easymaker").(*simem.Service)}
}

// client builds a client from the sim's connection; drop removes keys
// (secret_key to use the access key pair).
func (f *fixture) client(t *testing.T, drop ...string) *em.Client {
	t.Helper()
	conn := map[string]any{}
	for k, v := range f.conn {
		conn[k] = v
	}
	for _, k := range drop {
		delete(conn, k)
	}
	cfg, err := em.ConfigFrom(conn)
	require.NoError(t, err)
	cfg.Sleep = func(context.Context, time.Duration) error { return nil }
	c, err := em.New(cfg)
	require.NoError(t, err)
	return c
}

func (f *fixture) advance(d time.Duration) { f.srv.Clock.Advance(d) }

// ids resolves the catalog names the SDK would pass.
func ids(t *testing.T, c *em.Client) (flavor, image, algorithm string) {
	t.Helper()
	ctx := context.Background()
	var err error
	flavor, err = c.ResolveFlavor(ctx, "c2.c4m8")
	require.NoError(t, err)
	image, err = c.ResolveImage(ctx, "Ubuntu 22.04 CPU PyTorch Training")
	require.NoError(t, err)
	algorithm, err = c.ResolveAlgorithm(ctx, "Image Classification")
	require.NoError(t, err)
	return
}

func activeExperiment(t *testing.T, f *fixture, c *em.Client, name string) *em.Experiment {
	t.Helper()
	ctx := context.Background()
	e, err := c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: name})
	require.NoError(t, err)
	f.advance(time.Minute)
	e, err = c.GetExperiment(ctx, e.ExperimentID)
	require.NoError(t, err)
	require.Equal(t, em.StatusActive, e.ExperimentStatusCode)
	return e
}

func TestTrainModelDeployAndPredictEndToEnd(t *testing.T) {
	f := start(t)
	c := f.client(t)
	ctx := context.Background()
	flavor, image, algo := ids(t, c)

	e, err := c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: "churn"})
	require.NoError(t, err)
	assert.Equal(t, em.StatusCreateRequested, e.ExperimentStatusCode)
	again, err := c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: "churn"})
	require.NoError(t, err)
	assert.Equal(t, e.ExperimentID, again.ExperimentID, "an existing name answers the existing experiment")
	f.advance(time.Minute)

	tr, err := c.CreateTraining(ctx, em.CreateTrainingRequest{
		ExperimentID: e.ExperimentID, TrainingName: "train-1", ImageID: image, FlavorID: flavor, AlgorithmID: algo,
		DistributedNodeCount: 1, ModelUploadURI: "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_t/models/churn",
		HyperparameterList: []em.Hyperparameter{{HyperparameterKey: "lr", HyperparameterValue: "0.01"}},
	})
	require.NoError(t, err)
	seen := []string{tr.TrainingStatusCode}
	for i := 0; i < 12; i++ {
		f.advance(30 * time.Second)
		got, err := c.GetTraining(ctx, tr.TrainingID)
		require.NoError(t, err)
		if got.TrainingStatusCode != seen[len(seen)-1] {
			seen = append(seen, got.TrainingStatusCode)
		}
		tr = got
	}
	assert.Equal(t, []string{"CREATE_REQUESTED", "CREATE_IN_PROGRESS", "RUNNING", "COMPLETE_IN_PROGRESS", "COMPLETE"}, seen)
	assert.NotEmpty(t, tr.MetricList, "a complete training reports its metrics")

	found, err := c.FindTrainingByName(ctx, e.ExperimentID, "train-1")
	require.NoError(t, err)
	require.NotNil(t, found)
	assert.Equal(t, tr.TrainingID, found.TrainingID)
	none, err := c.FindTrainingByName(ctx, e.ExperimentID, "nope")
	require.NoError(t, err)
	assert.Nil(t, none)

	m, err := c.CreateModel(ctx, em.CreateModelRequest{ModelName: "churn-model", TrainingID: tr.TrainingID})
	require.NoError(t, err)
	assert.Equal(t, em.FrameworkPyTorch, m.FrameworkCode)
	f.advance(time.Minute)

	ep, err := c.CreateEndpoint(ctx, em.CreateEndpointRequest{EndpointName: "churn-ep", FlavorID: flavor,
		EndpointModelResourceList: []em.ModelResource{{ModelID: m.ModelID, APIGWResourceURI: "/churn", PodCount: 1}}})
	require.NoError(t, err)
	stage, err := c.DefaultStage(ctx, ep.EndpointID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusCreateRequested, stage.EndpointStageStatusCode)
	_, err = c.Predict(ctx, stage, "/churn", map[string]any{"instances": [][]float64{{1, 2}}})
	require.Error(t, err, "a stage that is not deployed does not answer")

	f.advance(3 * time.Minute)
	ep, err = c.GetEndpoint(ctx, ep.EndpointID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusActive, ep.EndpointStatusCode)
	stage, err = c.GetStage(ctx, ep.DefaultEndpointStageID)
	require.NoError(t, err)
	require.Equal(t, em.StatusActive, stage.EndpointStageStatusCode)
	require.Len(t, stage.EndpointModelList, 1)
	assert.Equal(t, em.StatusActive, stage.EndpointModelList[0].EndpointModelStatusCode)

	uri, ok := stage.ResourceURI(m.ModelID)
	require.True(t, ok)
	out, err := c.Predict(ctx, stage, uri, map[string]any{"instances": [][]float64{{1, 2}, {3, 4}}})
	require.NoError(t, err)
	var pred struct{ Predictions []float64 }
	require.NoError(t, json.Unmarshal(out, &pred))
	require.Len(t, pred.Predictions, 2)
	assert.Equal(t, simem.Predict(1, m.ModelID, []float64{3, 4}), pred.Predictions[1])
	again2, err := c.Predict(ctx, stage, uri, json.RawMessage(`{"instances": [[1, 2], [3, 4]]}`))
	require.NoError(t, err)
	assert.JSONEq(t, string(out), string(again2), "predictions are deterministic")

	_, err = c.Predict(ctx, stage, "/unknown", map[string]any{"instances": [][]float64{{1}}})
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	_, err = c.Predict(ctx, stage, uri, map[string]any{"rows": 1})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))

	// An extra stage, its models, and the refusals around deletes.
	st2, err := c.CreateStage(ctx, em.CreateStageRequest{EndpointID: ep.EndpointID, EndpointStageName: "canary", FlavorID: flavor,
		EndpointModelResourceList: []em.ModelResource{{ModelID: m.ModelID, APIGWResourceURI: "/v2", PodCount: 2}}})
	require.NoError(t, err)
	stages, err := c.ListStages(ctx, ep.EndpointID)
	require.NoError(t, err)
	assert.Len(t, stages, 2)
	ems, err := c.ListEndpointModels(ctx, st2.EndpointStageID)
	require.NoError(t, err)
	require.Len(t, ems, 1)
	assert.Equal(t, "/v2", ems[0].APIGWResourceURI)
	err = c.DeleteStage(ctx, ep.DefaultEndpointStageID)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "the default stage goes only with its endpoint")
	err = c.DeleteModel(ctx, m.ModelID)
	assert.Equal(t, fault.Conflict, fault.CodeOf(err), "a served model is not deleted")
	require.NoError(t, c.DeleteStage(ctx, st2.EndpointStageID))
	require.NoError(t, c.DeleteEndpoint(ctx, ep.EndpointID))
	_, err = c.GetEndpoint(ctx, ep.EndpointID)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	require.NoError(t, c.DeleteModel(ctx, m.ModelID))

	err = c.DeleteExperiment(ctx, e.ExperimentID)
	assert.Equal(t, fault.Conflict, fault.CodeOf(err), "an experiment with trainings is not deleted")
	require.NoError(t, c.DeleteTraining(ctx, tr.TrainingID))
	require.NoError(t, c.DeleteExperiment(ctx, e.ExperimentID))
}

func TestAFailingTrainingEndsInFailTrainWithAReason(t *testing.T) {
	f := start(t)
	c := f.client(t)
	ctx := context.Background()
	flavor, image, algo := ids(t, c)
	e := activeExperiment(t, f, c, "x")
	tr, err := c.CreateTraining(ctx, em.CreateTrainingRequest{ExperimentID: e.ExperimentID, TrainingName: "please-fail-train",
		ImageID: image, FlavorID: flavor, AlgorithmID: algo, DistributedNodeCount: 1, ModelUploadURI: "obs://h/v1/AUTH_t/c/m"})
	require.NoError(t, err)
	f.advance(2*time.Minute + 5*time.Second)
	tr, err = c.GetTraining(ctx, tr.TrainingID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusFailTrainInProgress, tr.TrainingStatusCode)
	done, failed := em.StatusDone(tr.TrainingStatusCode)
	assert.True(t, done && failed, "a wait fails as soon as the status says FAIL")
	f.advance(time.Minute)
	tr, err = c.GetTraining(ctx, tr.TrainingID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusFailTrain, tr.TrainingStatusCode)
	assert.Contains(t, tr.StatusReason, "fail-train")
}

func TestStopMovesATrainingToStopped(t *testing.T) {
	f := start(t)
	c := f.client(t)
	ctx := context.Background()
	flavor, image, algo := ids(t, c)
	e := activeExperiment(t, f, c, "x")
	tr, err := c.CreateTraining(ctx, em.CreateTrainingRequest{ExperimentID: e.ExperimentID, TrainingName: "t",
		ImageID: image, FlavorID: flavor, AlgorithmID: algo, DistributedNodeCount: 1, ModelUploadURI: "obs://h/v1/AUTH_t/c/m"})
	require.NoError(t, err)
	f.advance(90 * time.Second)
	err = c.DeleteTraining(ctx, tr.TrainingID)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "a running training is stopped before it is deleted")
	require.NoError(t, c.StopTraining(ctx, tr.TrainingID))
	tr, err = c.GetTraining(ctx, tr.TrainingID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusStopInProgress, tr.TrainingStatusCode)
	f.advance(time.Minute)
	tr, err = c.GetTraining(ctx, tr.TrainingID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusStopped, tr.TrainingStatusCode)
	require.NoError(t, c.DeleteTraining(ctx, tr.TrainingID))
}

func TestResolveNamesTheChoices(t *testing.T) {
	f := start(t)
	c := f.client(t)
	_, err := c.ResolveFlavor(context.Background(), "m2.c4m8x")
	require.Error(t, err)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	assert.Contains(t, err.Error(), `instance type "m2.c4m8x" does not exist; choices: c2.c4m8, `)
	n := len(f.srv.Journal.Calls("easymaker", "GET", "/v1.0/appkeys/"))
	_, err = c.ResolveFlavor(context.Background(), "c2.c8m16")
	require.NoError(t, err)
	assert.Len(t, f.srv.Journal.Calls("easymaker", "GET", "/v1.0/appkeys/"), n, "the flavor list is read once per client")
}

func TestAccessKeyAuthGetsATokenAndRefreshesItAfterA401(t *testing.T) {
	f := start(t)
	c := f.client(t, "secret_key")
	ctx := context.Background()
	_, err := c.ListExperiments(ctx)
	require.NoError(t, err)
	_, err = c.ListModels(ctx)
	require.NoError(t, err)
	assert.Len(t, f.srv.Journal.Calls("easymaker", "POST", "/oauth2/token/create"), 1, "the token is cached")
	f.svc.ExpireTokens()
	_, err = c.ListModels(ctx)
	require.NoError(t, err)
	assert.Len(t, f.srv.Journal.Calls("easymaker", "POST", "/oauth2/token/create"), 2, "a 401 gets a fresh token once")
}

func TestWrongCredentialsAreUnauthorized(t *testing.T) {
	f := start(t)
	conn := map[string]any{"base_url": f.conn["base_url"], "appkey": f.conn["appkey"], "secret_key": "wrong"}
	cfg, err := em.ConfigFrom(conn)
	require.NoError(t, err)
	c, err := em.New(cfg)
	require.NoError(t, err)
	_, err = c.ListExperiments(context.Background())
	assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
	var ae *em.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnauthorized, ae.HTTPStatus)

	cfg, err = em.ConfigFrom(map[string]any{"base_url": f.conn["base_url"], "appkey": f.conn["appkey"], "token_url": f.conn["token_url"],
		"access_key_id": "nobody", "access_key_secret": "x"})
	require.NoError(t, err)
	c, err = em.New(cfg)
	require.NoError(t, err)
	_, err = c.ListExperiments(context.Background())
	assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
}

func TestValidationErrorsNameTheField(t *testing.T) {
	f := start(t)
	c := f.client(t)
	ctx := context.Background()
	_, err := c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: string(make([]byte, 51))})
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	var ae *em.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.HTTPStatus)
	assert.NotZero(t, ae.ResultCode)
	assert.Contains(t, ae.ResultMessage, "experiment_name: must be at most 50 characters (got 51)")

	_, err = c.GetModel(ctx, "00000000-0000-0000-0000-000000000000")
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
}

func TestIdempotentCallsAreRetriedAndCreatesAreNot(t *testing.T) {
	f := start(t)
	c := f.client(t)
	ctx := context.Background()
	f.srv.Faults.Add(sim.Fault{Service: "easymaker", Method: "GET", Status: 503, Count: 2, RetryAfter: 1})
	_, err := c.ListExperiments(ctx)
	require.NoError(t, err, "two 503s are retried")

	f.srv.Faults.Add(sim.Fault{Service: "easymaker", Method: "POST", Status: 503, Count: 1})
	_, err = c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: "e"})
	require.Error(t, err, "a create is not retried on 503")
	assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
	var se *fault.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, true, se.Data["ambiguous"])

	f.srv.Faults.Add(sim.Fault{Service: "easymaker", Method: "POST", Status: 429, Count: 1})
	_, err = c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: "e"})
	require.NoError(t, err, "a create refused by the rate limiter (429) is retried")

	f.srv.Faults.Add(sim.Fault{Service: "easymaker", Method: "POST", Status: 413, Count: 1})
	_, err = c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: "e2"})
	require.NoError(t, err, "a create refused with 413 (the SDK's other refusal) is retried")

	f.srv.Faults.Add(sim.Fault{Service: "easymaker", Method: "DELETE", Status: 413, Count: 1})
	e, err := c.FindExperimentByName(ctx, "e")
	require.NoError(t, err)
	require.NotNil(t, e)
	require.NoError(t, c.DeleteExperiment(ctx, e.ExperimentID), "a delete is retried on 413")

	e2, err := c.FindExperimentByName(ctx, "e2")
	require.NoError(t, err)
	require.NotNil(t, e2)
	f.srv.Journal.Reset()
	f.srv.Faults.Add(sim.Fault{Service: "easymaker", Method: "DELETE", Status: 503, Count: 1})
	err = c.DeleteExperiment(ctx, e2.ExperimentID)
	require.ErrorAs(t, err, &se, "a delete is not repeated after a 503: it may have happened")
	assert.Equal(t, true, se.Data["ambiguous"])
	assert.Len(t, f.srv.Journal.Calls("easymaker", "DELETE", ""), 1)
}

func TestListsFollowPages(t *testing.T) {
	f := start(t)
	c := f.client(t)
	ctx := context.Background()
	for i := 0; i < 105; i++ {
		_, err := c.CreateExperiment(ctx, em.CreateExperimentRequest{ExperimentName: "e" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
		require.NoError(t, err)
	}
	all, err := c.ListExperiments(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 105)
	assert.Len(t, f.srv.Journal.Calls("easymaker", "GET", "/v1.0/appkeys/"+f.svc.AppKey()+"/experiments"), 2)
}
