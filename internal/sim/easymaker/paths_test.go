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
