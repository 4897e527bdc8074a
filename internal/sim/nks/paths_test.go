package nks_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim/nks"
)

// python-magnumclient always writes the node-group collection with a
// trailing slash (GET|POST /v1/clusters/{id}/nodegroups/); Magnum accepts
// both forms on every route.
func TestEveryRouteAcceptsATrailingSlashAsMagnumClientsSendIt(t *testing.T) {
	e := start(t)
	out := e.mustDo(202, "POST", "/v1/clusters/", createBody("slash", nil))
	e.srv.Clock.Advance(nks.DefaultDurations["CLUSTER_CREATE"])
	id := out["uuid"].(string)
	assert.Len(t, e.mustDo(200, "GET", "/v1/clusters/", nil)["clusters"], 1)
	assert.Equal(t, id, e.mustDo(200, "GET", "/v1/clusters/slash/", nil)["uuid"])
	g := e.mustDo(202, "POST", "/v1/clusters/"+id+"/nodegroups/", ngBody("batch"))
	assert.Equal(t, "batch", g["name"])
	assert.Len(t, e.mustDo(200, "GET", "/v1/clusters/"+id+"/nodegroups/", nil)["nodegroups"], 2)
	assert.Equal(t, "batch", e.mustDo(200, "GET", "/v1/clusters/"+id+"/nodegroups/batch/", nil)["name"])
	assert.NotEmpty(t, e.mustDo(200, "GET", "/v1/clusters/"+id+"/events/", nil)["events"])
	assert.Contains(t, e.mustDo(200, "GET", "/v1/supports/", nil), "supported_k8s")
	e.srv.Clock.Advance(nks.DefaultDurations["NODEGROUP_CREATE"])
	e.srv.Journal.Reset()
	r := e.do("DELETE", "/v1/clusters/"+id+"/nodegroups/batch/", nil)
	require.Equal(t, 204, r.status, r.raw)
	calls := e.srv.Journal.Calls("nks", "DELETE", "")
	require.Len(t, calls, 1)
	assert.Equal(t, "/v1/clusters/"+id+"/nodegroups/batch/", calls[0].Path, "the journal keeps the path as sent")
}
