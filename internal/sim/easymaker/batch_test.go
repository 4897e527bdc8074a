package easymaker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	simem "github.com/runbook/runbook/internal/sim/easymaker"
)

const obsBase = "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant1/data/"

func (e *env) activeModel(name string) *em.Model {
	e.t.Helper()
	m, err := e.client.CreateModel(e.ctx, em.CreateModelRequest{ModelName: name, ModelURI: modelURI, FrameworkCode: em.FrameworkTensorFlow})
	require.NoError(e.t, err)
	e.advance(time.Minute)
	return m
}

func batchReq(name, modelID, in, typ string) em.CreateBatchInferenceRequest {
	return em.CreateBatchInferenceRequest{BatchInferenceName: name, FlavorID: flavorID, ModelID: modelID, InstanceCount: 1,
		PodCount: 1, BatchSize: 10, InferenceTimeoutSeconds: 60, InputDataURI: obsBase + in, InputDataType: typ,
		OutputUploadURI: obsBase + "out/" + name, DataStorageSize: 300}
}

func TestBatchInferenceReadsObjectStorageAndWritesPredictions(t *testing.T) {
	e := start(t)
	m := e.activeModel("m")
	store := e.svc.Objects()
	store.Put("AUTH_tenant1", "data", "in/a.json", []byte(`{"instances": [[1, 2], [3, 4]]}`), "application/json")
	store.Put("AUTH_tenant1", "data", "in/b.json", []byte(`{"instances": [[5, 6]]}`), "application/json")
	store.Put("AUTH_tenant1", "data", "in/skip.txt", []byte(`not json`), "text/plain")
	req := batchReq("batch", m.ModelID, "in/", em.InputDataTypeJSON)
	req.IncludeGlobPattern = "*.json"
	b, err := e.client.CreateBatchInference(e.ctx, req)
	require.NoError(t, err)

	e.advance(2 * time.Minute)
	b, err = e.client.GetBatchInference(e.ctx, b.BatchInferenceID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusRunning, b.BatchInferenceStatusCode)
	assert.Empty(t, store.List("AUTH_tenant1", "data", "out/"), "nothing is written while running")

	e.advance(2 * time.Minute)
	b, err = e.client.GetBatchInference(e.ctx, b.BatchInferenceID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusComplete, b.BatchInferenceStatusCode)
	assert.Equal(t, 2, b.InputFileCount)
	assert.Equal(t, 3, b.InferenceCount)
	assert.Equal(t, []string{obsBase + "out/batch/a.json.out", obsBase + "out/batch/b.json.out"}, b.OutputFileList)

	out, ok := store.Get("AUTH_tenant1", "data", "out/batch/a.json.out")
	require.True(t, ok)
	var pred struct{ Predictions []float64 }
	require.NoError(t, json.Unmarshal(out, &pred))
	assert.Equal(t, []float64{simem.Predict(1, m.ModelID, []float64{1, 2}), simem.Predict(1, m.ModelID, []float64{3, 4})}, pred.Predictions)
}

func TestBatchInferenceOverJSONL(t *testing.T) {
	e := start(t)
	m := e.activeModel("m")
	e.svc.Objects().Put("AUTH_tenant1", "data", "lines.jsonl", []byte("[1, 2]\n\n{\"instances\": [[3, 4], [5, 6]]}\n"), "")
	b, err := e.client.CreateBatchInference(e.ctx, batchReq("jl", m.ModelID, "lines.jsonl", em.InputDataTypeJSONL))
	require.NoError(t, err)
	e.advance(5 * time.Minute)
	b, err = e.client.GetBatchInference(e.ctx, b.BatchInferenceID)
	require.NoError(t, err)
	require.Equal(t, em.StatusComplete, b.BatchInferenceStatusCode, b.StatusReason)
	assert.Equal(t, 3, b.InferenceCount)
	out, ok := e.svc.Objects().Get("AUTH_tenant1", "data", "out/jl/lines.jsonl.out")
	require.True(t, ok)
	assert.Len(t, strings.Split(strings.TrimSpace(string(out)), "\n"), 2, "one output line per input line")
}

func TestBatchInferenceFails(t *testing.T) {
	tests := []struct {
		name, batch, input, reason string
		put                        string
	}{
		{"when no input exists", "nothing", "missing/", "no input files under", ""},
		{"when the input is malformed", "bad", "bad.json", "input file bad.json", `{"instances": "x"}`},
		{"when its name asks to", "x-fail-batch", "ok.json", "fail-batch", `{"instances": [[1]]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t)
			m := e.activeModel("m")
			if tt.put != "" {
				e.svc.Objects().Put("AUTH_tenant1", "data", tt.input, []byte(tt.put), "")
			}
			b, err := e.client.CreateBatchInference(e.ctx, batchReq(tt.batch, m.ModelID, tt.input, em.InputDataTypeJSON))
			require.NoError(t, err)
			e.advance(2*time.Minute + 5*time.Second)
			b, err = e.client.GetBatchInference(e.ctx, b.BatchInferenceID)
			require.NoError(t, err)
			assert.Equal(t, em.StatusFailBatchInferenceIP, b.BatchInferenceStatusCode)
			e.advance(time.Minute)
			b, err = e.client.GetBatchInference(e.ctx, b.BatchInferenceID)
			require.NoError(t, err)
			assert.Equal(t, em.StatusFailBatchInference, b.BatchInferenceStatusCode)
			assert.Contains(t, b.StatusReason, tt.reason)
			assert.Empty(t, e.svc.Objects().List("AUTH_tenant1", "data", "out/"))
		})
	}
}

func TestStoppingABatchInferenceWritesNothing(t *testing.T) {
	e := start(t)
	m := e.activeModel("m")
	e.svc.Objects().Put("AUTH_tenant1", "data", "in.json", []byte(`{"instances": [[1]]}`), "")
	b, err := e.client.CreateBatchInference(e.ctx, batchReq("s", m.ModelID, "in.json", em.InputDataTypeJSON))
	require.NoError(t, err)
	e.advance(90 * time.Second)
	require.NoError(t, e.client.StopBatchInference(e.ctx, b.BatchInferenceID))
	e.advance(time.Hour)
	b, err = e.client.GetBatchInference(e.ctx, b.BatchInferenceID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusStopped, b.BatchInferenceStatusCode)
	assert.Empty(t, e.svc.Objects().List("AUTH_tenant1", "data", "out/"))
	err = e.client.StopBatchInference(e.ctx, b.BatchInferenceID)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "a finished run cannot be stopped")
	require.NoError(t, e.client.DeleteBatchInference(e.ctx, b.BatchInferenceID))
}
