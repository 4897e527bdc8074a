package easymaker_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
)

func TestBodyPathNamesFieldsAsTheRequestBodyDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  any
		path string
		want string
	}{
		{"a name", &em.CreateTrainingRequest{}, "training_name", "trainingName"},
		{"an ID the SDK also names by ID", em.CreateTrainingRequest{}, "flavor_id", "flavorId"},
		{"a list element's field", &em.CreateTrainingRequest{}, "tag_list[2].tagKey", "tagList[2].tagKey"},
		{"a list", &em.CreateTuningRequest{}, "hyperparameter_spec_list", "hyperparameterSpecList"},
		{"a word split differently", &em.CreateTrainingRequest{}, "check_point_input_uri", "checkPointInputUri"},
		{"a dataset URI", &em.CreateTrainingRequest{}, "dataset_list[0].dataUri", "datasetList[0].dataUri"},
		{"the SDK's stage_name", &em.CreateStageRequest{}, "stage_name", "endpointStageName"},
		{"the SDK's batch description", &em.CreateBatchInferenceRequest{}, "description", "batchInferenceDescription"},
		{"a name the body does not have", &em.CreateTrainingRequest{}, "no_such_field", "no_such_field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, em.BodyPath(tc.req, tc.path))
		})
	}
}

// Every problem the limit checks report on empty and oversized requests
// names a field of the body.
func TestEveryProblemNamesABodyField(t *testing.T) {
	long := strings.Repeat("x", 300)
	tags := []em.Tag{{TagKey: long}}
	for _, req := range []interface{ Problems() []fault.Problem }{
		&em.CreateExperimentRequest{ExperimentDescription: long, TagList: tags},
		&em.CreateTrainingRequest{TrainingDescription: long, TagList: tags, SourceDirURI: "x", CheckPointInputURI: "obs://x",
			DatasetList: []em.Dataset{{DataURI: "x"}}, HyperparameterList: []em.Hyperparameter{{}}},
		&em.CreateTuningRequest{HyperparameterTuningDescription: long, TagList: tags},
		&em.CreateModelRequest{ModelDescription: long, TagList: tags},
		&em.CreateEndpointRequest{EndpointDescription: long, TagList: tags},
		&em.CreateStageRequest{EndpointStageDescription: long, TagList: tags},
		&em.CreateBatchInferenceRequest{BatchInferenceDescription: long, TagList: tags},
	} {
		ps := req.Problems()
		require.NotEmpty(t, ps)
		for _, p := range ps {
			assert.NotContains(t, em.BodyPath(req, p.Path), "_", "%T: %s", req, p.Path)
		}
	}
}
