package easymaker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDatasetPathIsSentUnderBothNamesAndReadFromEither(t *testing.T) {
	b, err := json.Marshal(Dataset{DatasetName: "train", DataURI: "obs://h/v1/AUTH_t/c/d"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"datasetName":"train","dataUri":"obs://h/v1/AUTH_t/c/d","datasetUri":"obs://h/v1/AUTH_t/c/d"}`, string(b))
	for _, in := range []string{`{"datasetName":"x","dataUri":"u"}`, `{"datasetName":"x","datasetUri":"u"}`} {
		var d Dataset
		require.NoError(t, json.Unmarshal([]byte(in), &d))
		assert.Equal(t, Dataset{DatasetName: "x", DataURI: "u"}, d, in)
	}
}
