package easymaker_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

func TestAnswersUseTheEnvelope(t *testing.T) {
	e := start(t)
	r := e.do("POST", "/experiments", map[string]any{"experimentName": "e1", "experimentDescription": "d"})
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	assert.Equal(t, map[string]any{"isSuccessful": true, "resultCode": 0.0, "resultMessage": "SUCCESS"}, r.header())
	exp := r.body["experiment"].(map[string]any)
	assert.Equal(t, "e1", exp["experimentName"])
	assert.Equal(t, "CREATE_REQUESTED", exp["experimentStatusCode"])
	assert.NotEmpty(t, exp["experimentId"])

	r = e.do("GET", "/experiments", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Len(t, r.body["experimentList"], 1)
	assert.Equal(t, map[string]any{"page": 1.0, "limit": 50.0, "totalCount": 1.0}, r.body["paging"])

	r = e.do("GET", "/experiments/nope", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Equal(t, false, r.header()["isSuccessful"])
	assert.Equal(t, 40400.0, r.header()["resultCode"])
	assert.Contains(t, r.header()["resultMessage"], "experiment nope does not exist")
}

func TestRoutesAnswerNotFoundAndMethodNotAllowed(t *testing.T) {
	e := start(t)
	tests := []struct {
		name, method, path string
		status             int
	}{
		{"an unknown collection is 404", "GET", "/widgets", 404},
		{"a path too deep is 404", "GET", "/trainings/x/y/z", 404},
		{"an action other than stop is 404", "PUT", "/trainings/x/start", 404},
		{"a create on the catalog is 405", "POST", "/flavors", 405},
		{"a stop of an experiment is 405", "PUT", "/experiments/x/stop", 405},
		{"stages need endpointId", "GET", "/endpoint-stages", 400},
		{"endpoint models need endpointStageId", "GET", "/endpoint-models", 400},
		{"a bad page is 400", "GET", "/models?page=0", 400},
		{"a body that is not JSON is 400", "POST", "/models", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.method == "POST" {
				body = "{not json"
			}
			r := e.do(tt.method, tt.path, body)
			assert.Equal(t, tt.status, r.status, r.raw)
			assert.Equal(t, false, r.header()["isSuccessful"])
		})
	}
}

func TestAuthentication(t *testing.T) {
	e := start(t)
	r := e.do("GET", "/models", nil, em.HeaderSecretKey, "")
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, 40100.0, r.header()["resultCode"])
	r = e.do("GET", "/models", nil, em.HeaderSecretKey, "wrong")
	assert.Equal(t, http.StatusUnauthorized, r.status)

	r = e.raw("GET", e.conn["base_url"].(string)+"/v1.0/appkeys/other/models", nil, em.HeaderSecretKey, e.svc.SecretKey())
	assert.Equal(t, http.StatusForbidden, r.status, "another appkey")

	tokenURL := e.conn["token_url"].(string)
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	req, err := http.NewRequest("POST", tokenURL, strings.NewReader(form))
	require.NoError(t, err)
	id, secret := e.svc.AccessKey()
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req, _ = http.NewRequest("POST", tokenURL, strings.NewReader(form))
	req.SetBasicAuth(id, "wrong")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req, _ = http.NewRequest("POST", tokenURL, strings.NewReader("grant_type=password"))
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	r = e.do("GET", "/models", nil, em.HeaderSecretKey, "", em.HeaderAuthorization, "Bearer forged")
	assert.Equal(t, http.StatusUnauthorized, r.status)
}

func TestTokensExpireOnTheSimulatedClock(t *testing.T) {
	e := start(t)
	cfg, err := em.ConfigFrom(map[string]any{"base_url": e.conn["base_url"], "appkey": e.conn["appkey"],
		"access_key_id": e.conn["access_key_id"], "access_key_secret": e.conn["access_key_secret"], "token_url": e.conn["token_url"]})
	require.NoError(t, err)
	// The client's clock is real time, so it does not know the token
	// expired on the simulated clock: the service's 401 makes it fetch a
	// new one and repeat the call.
	cl, err := em.New(cfg)
	require.NoError(t, err)
	_, err = cl.ListModels(e.ctx)
	require.NoError(t, err)
	e.advance(25 * time.Hour)
	_, err = cl.ListModels(e.ctx)
	require.NoError(t, err)
	assert.Len(t, e.srv.Journal.Calls("easymaker", "POST", "/oauth2/token/create"), 2, "an expired token is replaced")
}

// TestLimitsAreChecked sends one bad field at a time and expects a 400
// naming it.
func TestLimitsAreChecked(t *testing.T) {
	e := start(t)
	exp := e.experiment("limits")
	long := func(n int) string { return strings.Repeat("a", n) }
	training := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"experimentId": exp, "trainingName": "t", "imageId": imageID, "flavorId": flavorID,
			"algorithmId": algoID, "distributedNodeCount": 1, "modelUploadUri": modelURI}
		mod(m)
		return m
	}
	tuning := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"experimentId": exp, "hyperparameterTuningName": "h", "imageId": imageID, "flavorId": flavorID,
			"algorithmId": algoID, "distributedNodeCount": 1, "parallelTrialCount": 1, "modelUploadUri": modelURI,
			"tuningStrategyName": "BAYESIAN_OPTIMIZATION", "earlyStoppingAlgorithm": "MEDIAN"}
		mod(m)
		return m
	}
	endpoint := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"endpointName": "ep", "flavorId": flavorID,
			"endpointModelResourceList": []map[string]any{{"modelId": "m", "apigwResourceUri": "/p", "podCount": 1}}}
		mod(m)
		return m
	}
	batch := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"batchInferenceName": "b", "flavorId": flavorID, "modelId": "m", "instanceCount": 1, "podCount": 1,
			"batchSize": 1, "inferenceTimeoutSeconds": 1, "inputDataUri": modelURI, "inputDataType": "JSON",
			"outputUploadUri": modelURI, "dataStorageSize": 300}
		mod(m)
		return m
	}
	tags := func(n int) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			out[i] = map[string]any{"tagKey": "k", "tagValue": "v"}
		}
		return out
	}
	tests := []struct {
		name, path string
		body       map[string]any
		field      string
	}{
		{"experiment name over 50", "/experiments", map[string]any{"experimentName": long(51)}, "experiment_name: must be at most 50"},
		{"experiment description over 255", "/experiments", map[string]any{"experimentName": "x", "experimentDescription": long(256)}, "experiment_description"},
		{"more than 10 tags", "/experiments", map[string]any{"experimentName": "x", "tagList": tags(11)}, "tag_list: must have at most 10"},
		{"tag key over 64", "/experiments", map[string]any{"experimentName": "x", "tagList": []map[string]any{{"tagKey": long(65)}}}, "tag_list[0].tagKey"},
		{"distributed nodes over 10", "/trainings", training(func(m map[string]any) { m["distributedNodeCount"] = 11 }), "distributed_node_count: must be between 1 and 10 (got 11)"},
		{"storage under 300", "/trainings", training(func(m map[string]any) { m["dataStorageSize"] = 299 }), "data_storage_size: must be between 300 and 10000"},
		{"timeout over 720", "/trainings", training(func(m map[string]any) { m["timeoutHours"] = 721 }), "timeout_hours: must be between 1 and 720"},
		{"model upload URI over 255", "/trainings", training(func(m map[string]any) { m["modelUploadUri"] = long(256) }), "model_upload_uri"},
		{"no algorithm", "/trainings", training(func(m map[string]any) { delete(m, "algorithmId") }), "algorithm_id: is required unless an own algorithm"},
		{"an entry point without its directory", "/trainings", training(func(m map[string]any) { delete(m, "algorithmId"); m["entryPoint"] = "main.py" }), "source_dir_uri: is required with entry_point"},
		{"object storage data without a data size", "/trainings", training(func(m map[string]any) {
			m["datasetList"] = []map[string]any{{"datasetName": "d", "dataUri": "obs://host/v1/AUTH_t/c/data"}}
		}), "data_storage_size: is required (300 to 10000 GB) when data comes from object storage (dataset_list[0].dataUri"},
		{"nproc_per_node without torchrun", "/trainings", training(func(m map[string]any) { m["nprocPerNode"] = 2 }), "nproc_per_node: is only taken with use_torchrun"},
		{"a path neither obs:// nor nas://", "/trainings", training(func(m map[string]any) { m["checkPointUploadUri"] = "s3://bucket/ckpt" }), "check_point_upload_uri: must be an object storage (obs://) or NAS (nas://) path"},
		{"more than 10 datasets", "/trainings", training(func(m map[string]any) {
			ds := make([]map[string]any, 11)
			for i := range ds {
				ds[i] = map[string]any{"datasetName": "d", "dataUri": "obs://x"}
			}
			m["datasetList"] = ds
		}), "dataset_list: must have at most 10"},
		{"more than 100 hyperparameters", "/trainings", training(func(m map[string]any) {
			hs := make([]map[string]any, 101)
			for i := range hs {
				hs[i] = map[string]any{"hyperparameterKey": "k", "hyperparameterValue": "v"}
			}
			m["hyperparameterList"] = hs
		}), "hyperparameter_list: must have at most 100"},
		{"an unknown flavor", "/trainings", training(func(m map[string]any) { m["flavorId"] = "nope" }), "flavor_id: instance type nope does not exist"},
		{"nodes x trials over 10", "/hyperparameter-tunings", tuning(func(m map[string]any) { m["distributedNodeCount"] = 4; m["parallelTrialCount"] = 3 }), "4 x 3 = 12"},
		{"an unknown strategy", "/hyperparameter-tunings", tuning(func(m map[string]any) { m["tuningStrategyName"] = "GUESS" }), "tuning_strategy_name"},
		{"an early stopping other than MEDIAN", "/hyperparameter-tunings", tuning(func(m map[string]any) { m["earlyStoppingAlgorithm"] = "NONE" }), "early_stopping_algorithm"},
		{"an own algorithm without metrics", "/hyperparameter-tunings", tuning(func(m map[string]any) {
			delete(m, "algorithmId")
			m["sourceDirUri"], m["entryPoint"] = "obs://s", "main.py"
		}), "metric_list: is required"},
		{"a model with two sources", "/models", map[string]any{"modelName": "m", "trainingId": "t", "modelUri": "obs://x", "frameworkCode": "PYTORCH"}, "exactly one of"},
		{"a model URI without framework", "/models", map[string]any{"modelName": "m", "modelUri": "obs://x"}, "framework_code"},
		{"endpoint instances over 10", "/endpoints", endpoint(func(m map[string]any) { m["endpointInstanceCount"] = 11 }), "endpoint_instance_count"},
		{"pod count over 100", "/endpoints", endpoint(func(m map[string]any) {
			m["endpointModelResourceList"] = []map[string]any{{"modelId": "m", "apigwResourceUri": "/p", "podCount": 101}}
		}), "endpoint_model_resource_list[0].podCount: must be between 1 and 100"},
		{"a resource URI without a slash", "/endpoints", endpoint(func(m map[string]any) {
			m["endpointModelResourceList"] = []map[string]any{{"modelId": "m", "apigwResourceUri": "p", "podCount": 1}}
		}), "must start with /"},
		{"no model resources", "/endpoints", endpoint(func(m map[string]any) { m["endpointModelResourceList"] = []any{} }), "endpoint_model_resource_list: is required"},
		{"an unknown model", "/endpoints", endpoint(func(m map[string]any) {}), "model m does not exist"},
		{"batch size over 1000", "/batch-inferences", batch(func(m map[string]any) { m["batchSize"] = 1001 }), "batch_size: must be between 1 and 1000"},
		{"inference timeout over 1200", "/batch-inferences", batch(func(m map[string]any) { m["inferenceTimeoutSeconds"] = 1201 }), "inference_timeout_seconds"},
		{"batch pods over 100", "/batch-inferences", batch(func(m map[string]any) { m["podCount"] = 101 }), "pod_count"},
		{"batch instances over 10", "/batch-inferences", batch(func(m map[string]any) { m["instanceCount"] = 11 }), "instance_count: must be between 1 and 10"},
		{"an input type other than JSON or JSONL", "/batch-inferences", batch(func(m map[string]any) { m["inputDataType"] = "CSV" }), "input_data_type"},
		{"batch storage over 10000", "/batch-inferences", batch(func(m map[string]any) { m["dataStorageSize"] = 10001 }), "data_storage_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", tt.path, tt.body)
			require.Equal(t, http.StatusBadRequest, r.status, r.raw)
			assert.Equal(t, 40000.0, r.header()["resultCode"])
			assert.Contains(t, r.header()["resultMessage"], tt.field)
		})
	}
}

// TestNASDataNeedsNoStorageSize: data_storage_size is required only when
// data comes from object storage; NAS inputs go without it.
func TestNASDataNeedsNoStorageSize(t *testing.T) {
	e := start(t)
	exp := e.experiment("nas")
	body := map[string]any{"experimentId": exp, "trainingName": "t", "imageId": imageID, "flavorId": flavorID,
		"sourceDirUri": "nas://share/src", "entryPoint": "main.py", "distributedNodeCount": 1, "modelUploadUri": modelURI,
		"datasetList": []map[string]any{{"datasetName": "d", "dataUri": "nas://share/data"}}}
	r := e.do("POST", "/trainings", body)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	body["trainingName"], body["sourceDirUri"] = "t2", "obs://host/v1/AUTH_t/c/src"
	r = e.do("POST", "/trainings", body)
	require.Equal(t, http.StatusBadRequest, r.status, r.raw)
	assert.Contains(t, r.header()["resultMessage"], "data_storage_size: is required")
}

func TestDuplicateNamesConflict(t *testing.T) {
	e := start(t)
	exp := e.experiment("dup")
	body := map[string]any{"experimentId": exp, "trainingName": "t", "imageId": imageID, "flavorId": flavorID,
		"algorithmId": algoID, "distributedNodeCount": 1, "modelUploadUri": modelURI}
	require.Equal(t, http.StatusCreated, e.do("POST", "/trainings", body).status)
	r := e.do("POST", "/trainings", body)
	assert.Equal(t, http.StatusConflict, r.status)
	assert.Equal(t, 40900.0, r.header()["resultCode"])
}

func TestTrainingsNeedAnActiveExperiment(t *testing.T) {
	e := start(t)
	x, err := e.client.CreateExperiment(e.ctx, em.CreateExperimentRequest{ExperimentName: "young"})
	require.NoError(t, err)
	r := e.do("POST", "/trainings", map[string]any{"experimentId": x.ExperimentID, "trainingName": "t", "imageId": imageID,
		"flavorId": flavorID, "algorithmId": algoID, "distributedNodeCount": 1, "modelUploadUri": modelURI})
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, r.header()["resultMessage"], "is not ACTIVE")
}

func TestPredictRefusesBadRequests(t *testing.T) {
	e := start(t)
	m := e.activeModel("m")
	ep, err := e.client.CreateEndpoint(e.ctx, em.CreateEndpointRequest{EndpointName: "ep", FlavorID: flavorID,
		EndpointModelResourceList: []em.ModelResource{{ModelID: m.ModelID, APIGWResourceURI: "/p", PodCount: 1}}})
	require.NoError(t, err)
	e.advance(5 * time.Minute)
	st, err := e.client.GetStage(e.ctx, ep.DefaultEndpointStageID)
	require.NoError(t, err)
	tests := []struct {
		name, method, url, body string
		status                  int
	}{
		{"a good body", "POST", st.APIGWStageURL + "/p", `{"instances": [[1, 2]]}`, 200},
		{"no instances", "POST", st.APIGWStageURL + "/p", `{}`, 400},
		{"instances that are not numbers", "POST", st.APIGWStageURL + "/p", `{"instances": [["a"]]}`, 400},
		{"not JSON", "POST", st.APIGWStageURL + "/p", `hello`, 400},
		{"an unknown resource", "POST", st.APIGWStageURL + "/q", `{"instances": [[1]]}`, 404},
		{"an unknown stage", "POST", e.conn["base_url"].(string) + "/_stage/nope/p", `{"instances": [[1]]}`, 404},
		{"a GET", "GET", st.APIGWStageURL + "/p", ``, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.raw(tt.method, tt.url, tt.body)
			assert.Equal(t, tt.status, r.status, r.raw)
			if tt.status != 200 {
				assert.NotEmpty(t, r.body["error"])
			} else {
				assert.Len(t, r.body["predictions"], 1)
			}
		})
	}
}
