package easymaker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCollectionsAndResourcesAcceptATrailingSlash(t *testing.T) {
	e := start(t)
	id := e.experiment("slash")
	r := e.do("GET", "/experiments/", nil)
	require.Equal(t, 200, r.status, r.raw)
	assert.Contains(t, r.raw, id)
	r = e.do("GET", "/experiments/"+id+"/", nil)
	require.Equal(t, 200, r.status, r.raw)
	assert.Contains(t, r.raw, id)
	r = e.do("GET", "/flavors/", nil)
	assert.Equal(t, 200, r.status, r.raw)
}

// The API's callers write camelCase bodies: an error names the field as
// they wrote it, then as the SDK and the steps call it.
func TestLimitErrorsNameTheFieldAsTheBodyDoesAndAsTheSDKDoes(t *testing.T) {
	e := start(t)
	exp := e.experiment("names")
	body := map[string]any{"experimentId": exp, "trainingName": "", "imageId": imageID, "flavorId": flavorID,
		"sourceDirUri": "obs://host/v1/AUTH_t/c/src", "entryPoint": "main.py", "distributedNodeCount": 11, "modelUploadUri": modelURI,
		"tagList": []map[string]any{{"tagKey": ""}}}
	r := e.do("POST", "/trainings", body)
	require.Equal(t, 400, r.status, r.raw)
	msg := r.header()["resultMessage"].(string)
	for _, want := range []string{
		"trainingName / training_name: is required",
		"distributedNodeCount / distributed_node_count: must be between 1 and 10 (got 11)",
		"tagList[0].tagKey / tag_list[0].tagKey: is required",
		"dataStorageSize / data_storage_size: is required",
	} {
		assert.Contains(t, msg, want)
	}
}
