package conformance_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/clusters"
	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/nodegroups"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim/nks"
)

// gophercloud logs in through the identity simulator (Keystone v2), finds
// the container-infra endpoint in the catalog, and manages a cluster and
// a node group from create to delete.
func TestGophercloudManagesClustersAndNodeGroupsEndToEnd(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	c := credentials(s)
	provider, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: s.URL("identity") + "/v2.0/",
		Username:         c.Username, Password: c.Password, TenantID: c.TenantID,
	})
	require.NoError(t, err)
	client, err := openstack.NewContainerInfraV1(provider, gophercloud.EndpointOpts{Region: "KR1"})
	require.NoError(t, err)
	client.Microversion = "1.10" // node groups need 1.9 or later
	require.Equal(t, s.URL("nks")+"/v1/", client.Endpoint)

	nodes, timeout := 2, 60
	id, err := clusters.Create(ctx, client, clusters.CreateOpts{
		Name: "gc", ClusterTemplateID: "iaas_console", Keypair: "ops-key", FlavorID: flavorID,
		NodeCount: &nodes, CreateTimeout: &timeout, FixedNetwork: fixedNetwork, FixedSubnet: fixedSubnet,
		Labels: clusterLabels(),
	}).Extract()
	require.NoError(t, err)
	got, err := clusters.Get(ctx, client, id).Extract()
	require.NoError(t, err)
	assert.Equal(t, "CREATE_IN_PROGRESS", got.Status)
	s.Clock.Advance(nks.DefaultDurations["CLUSTER_CREATE"])
	got, err = clusters.Get(ctx, client, "gc").Extract()
	require.NoError(t, err)
	assert.Equal(t, "CREATE_COMPLETE", got.Status)
	assert.Equal(t, id, got.UUID)
	assert.Equal(t, "v1.29.3", got.Labels["kube_tag"])
	assert.Equal(t, 2, got.NodeCount)

	pages, err := clusters.List(client, nil).AllPages(ctx)
	require.NoError(t, err)
	list, err := clusters.ExtractClusters(pages)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "gc", list[0].Name)

	g, err := nodegroups.Create(ctx, client, id, nodegroups.CreateOpts{
		Name: "batch", FlavorID: flavorID, ImageID: imageID, NodeCount: &nodes,
		Labels: map[string]string{"availability_zone": "kr-pub-b", "boot_volume_type": "General SSD", "boot_volume_size": "50", "ca_enable": "False"},
	}).Extract()
	require.NoError(t, err)
	assert.Equal(t, "batch", g.Name)
	assert.Equal(t, id, g.ClusterID)
	s.Clock.Advance(nks.DefaultDurations["NODEGROUP_CREATE"])
	g, err = nodegroups.Get(ctx, client, id, "batch").Extract()
	require.NoError(t, err)
	assert.Equal(t, "CREATE_COMPLETE", g.Status)
	pages, err = nodegroups.List(client, id, nil).AllPages(ctx)
	require.NoError(t, err)
	groups, err := nodegroups.ExtractNodeGroups(pages)
	require.NoError(t, err)
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	assert.ElementsMatch(t, []string{"default-worker", "batch"}, names)

	require.NoError(t, nodegroups.Delete(ctx, client, id, g.UUID).ExtractErr())
	err = clusters.Delete(ctx, client, id).ExtractErr()
	require.Error(t, err, "a cluster with a group being deleted is refused, as Magnum refuses an operation in progress")
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusBadRequest), "%v", err)
	// A caller waits for the group to disappear, then deletes the cluster.
	s.Clock.Advance(nks.DefaultDurations["NODEGROUP_DELETE"])
	_, err = nodegroups.Get(ctx, client, id, g.UUID).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "%v", err)
	require.NoError(t, clusters.Delete(ctx, client, id).ExtractErr())
	s.Clock.Advance(nks.DefaultDurations["CLUSTER_DELETE"])
	_, err = clusters.Get(ctx, client, id).Extract()
	var nf gophercloud.ErrUnexpectedResponseCode
	require.True(t, errors.As(err, &nf), "%v", err)
	assert.Equal(t, http.StatusNotFound, nf.Actual)
}
