package network_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
	simnet "github.com/runbook/runbook/internal/sim/network"
	_ "github.com/runbook/runbook/internal/sim/nks"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/network"
	_ "github.com/runbook/runbook/internal/steps/nks"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// lookupSim is the simulator (identity, cluster, network and image APIs)
// over loopback; steps run with its cluster connection as "nks".
type lookupSim struct {
	t     *testing.T
	srv   *sim.Server
	world *simnet.World
	conn  map[string]any
}

func startSim(t *testing.T) *lookupSim {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks", "network", "image"},
		Speed: 3000, Start: time.Date(2026, 4, 4, 2, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return &lookupSim{t: t, srv: srv, world: srv.Service("network").(*simnet.Service).World(), conn: srv.Connections()["nks"]}
}

func desc(t testing.TB, name string) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup(name)
	require.True(t, ok, "step type %s is registered", name)
	return d
}

func (s *lookupSim) try(typ string, with map[string]any) (steps.Outputs, error) {
	s.t.Helper()
	d := desc(s.t, typ)
	c := stepstest.NewCall(s.t, d, with)
	stepstest.HostOf(c).Connections["nks"] = s.conn
	return d.Run(context.Background(), c)
}

func (s *lookupSim) run(typ string, with map[string]any) steps.Outputs {
	s.t.Helper()
	out, err := s.try(typ, with)
	require.NoError(s.t, err, "%s", typ)
	return out
}

func TestTheInternetGatewayNetworkIsFoundAndItsSubnetsJoinedWithColons(t *testing.T) {
	s := startSim(t)
	out := s.run("network.external", nil)
	assert.Equal(t, simnet.PublicNetworkID, out["network_id"])
	assert.Equal(t, "Public Network", out["network_name"])
	assert.Equal(t, []any{simnet.PublicSubnet1ID, simnet.PublicSubnet2ID}, out["subnet_id_list"])
	assert.Equal(t, simnet.PublicSubnet1ID+":"+simnet.PublicSubnet2ID, out["subnet_ids"])

	calls := s.srv.Journal.Calls("network", http.MethodGet, "")
	require.Len(t, calls, 1, "one call")
	assert.Equal(t, "/v2.0/networks", calls[0].Path)
	assert.Equal(t, "router:external=True", calls[0].Query, "the spec's query")
}

func TestSeveralOrNoInternetGatewayNetworksFailWithTheCandidates(t *testing.T) {
	s := startSim(t)
	const second = "b1b2c3d4-0000-4000-8000-0000000000b1"
	s.world.AddNetwork(simnet.Network{ID: second, Name: "Public Network 2", External: true})
	require.NoError(t, s.world.AddSubnet(simnet.Subnet{ID: "b1b2c3d4-0000-4000-8000-0000000000b2", NetworkID: second, CIDR: "133.187.0.0/24"}))

	_, err := s.try("network.external", nil)
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.ErrorContains(t, err, "2 networks are router:external")
	assert.ErrorContains(t, err, simnet.PublicNetworkID)
	assert.ErrorContains(t, err, second)
	assert.ErrorContains(t, err, "set name")

	out := s.run("network.external", map[string]any{"name": "Public Network 2"})
	assert.Equal(t, second, out["network_id"])
	assert.Equal(t, "b1b2c3d4-0000-4000-8000-0000000000b2", out["subnet_ids"])
	out = s.run("network.external", map[string]any{"name": simnet.PublicNetworkID})
	assert.Equal(t, "Public Network", out["network_name"], "name may be the UUID")

	_, err = s.try("network.external", map[string]any{"name": "Default Network"})
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	assert.ErrorContains(t, err, `no router:external network is named "Default Network"; they are "Public Network"`)

	s.world.AddNetwork(simnet.Network{ID: "c1b2c3d4-0000-4000-8000-0000000000c1", Name: "Bare Gateway", External: true})
	_, err = s.try("network.external", map[string]any{"name": "Bare Gateway"})
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	assert.ErrorContains(t, err, "has no subnets")
}

func TestNoInternetGatewayNetworkIsNotFound(t *testing.T) {
	s := startSim(t)
	s.world.AddNetwork(simnet.Network{ID: simnet.PublicNetworkID, Name: "Public Network", External: false})
	_, err := s.try("network.external", nil)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	assert.ErrorContains(t, err, "no network is router:external")
}

func TestNetworksAndSubnetsAreListedWithTheAPIsFilters(t *testing.T) {
	s := startSim(t)
	out := s.run("network.list", nil)
	assert.Equal(t, 2, out["count"])
	assert.Equal(t, []any{simnet.DefaultNetworkID, simnet.PublicNetworkID}, out["network_ids"])

	out = s.run("network.list", map[string]any{"router_external": false})
	assert.Equal(t, []any{simnet.DefaultNetworkID}, out["network_ids"])
	n := out["networks"].([]any)[0].(map[string]any)
	assert.Equal(t, false, n["router_external"])
	assert.Equal(t, []any{simnet.DefaultSubnetID}, n["subnets"])
	assert.Equal(t, "ACTIVE", n["status"])

	out = s.run("network.list", map[string]any{"name": "Public Network", "shared": true, "status": "ACTIVE"})
	assert.Equal(t, []any{simnet.PublicNetworkID}, out["network_ids"])
	out = s.run("network.list", map[string]any{"name": "nope"})
	assert.Equal(t, 0, out["count"])
	assert.Equal(t, []any{}, out["networks"])
	queries := []string{}
	for _, c := range s.srv.Journal.Calls("network", http.MethodGet, "/v2.0/networks") {
		queries = append(queries, c.Query)
	}
	assert.Equal(t, []string{"", "router:external=False", "name=Public+Network&shared=True&status=ACTIVE", "name=nope"}, queries)

	out = s.run("network.subnets", map[string]any{"network_id": simnet.PublicNetworkID})
	assert.Equal(t, 2, out["count"])
	assert.Equal(t, simnet.PublicSubnet1ID+":"+simnet.PublicSubnet2ID, out["subnet_ids"])
	assert.Equal(t, []any{simnet.PublicSubnet1ID, simnet.PublicSubnet2ID}, out["subnet_id_list"])
	sub := out["subnets"].([]any)[1].(map[string]any)
	assert.Equal(t, "133.186.1.0/24", sub["cidr"])
	out = s.run("network.subnets", map[string]any{"network_id": simnet.PublicNetworkID, "cidr": "133.186.1.0/24"})
	assert.Equal(t, []any{simnet.PublicSubnet2ID}, out["subnet_id_list"])
}

func TestEveryBaseImageIsFoundByNameWithItsRegionsUUID(t *testing.T) {
	s := startSim(t)
	for _, name := range simnet.BaseImages {
		out := s.run("image.find", map[string]any{"name": name})
		assert.Equal(t, simnet.ImageID(simnet.Region, name), out["image_id"], name)
		assert.Equal(t, name, out["name"])
	}
	assert.Equal(t, "name=Rocky+Linux+8.9", s.srv.Journal.Calls("image", http.MethodGet, "/v2/images")[2].Query)
}

func TestAnUnknownImageNameListsTheValidNames(t *testing.T) {
	s := startSim(t)
	_, err := s.try("image.find", map[string]any{"name": "Ubuntu Server 22.04 LTS"})
	require.Error(t, err)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	for _, name := range simnet.BaseImages {
		assert.ErrorContains(t, err, name)
	}
	assert.ErrorContains(t, err, `did you mean "Ubuntu Server 22.04.3 LTS"?`)
}

func TestRefusedCredentialsAreUnauthorized(t *testing.T) {
	s := startSim(t)
	s.conn["token"] = "not-a-token"
	_, err := s.try("network.external", nil)
	assert.Equal(t, fault.Unauthorized, fault.CodeOf(err), "%v", err)
	var se *fault.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 401, se.Data["http_status"])
}

func TestABadURLIsInvalidAndABadGatewayRetried(t *testing.T) {
	s := startSim(t)
	good := s.conn["image_url"]
	s.conn["image_url"] = "no-scheme"
	_, err := s.try("image.find", map[string]any{"name": "CentOS 7.9"})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "image_url")
	s.conn["image_url"] = good

	s.srv.Faults.Add(sim.Fault{Service: "image", Status: 502, Count: 1})
	out := s.run("image.find", map[string]any{"name": "CentOS 7.9"})
	assert.Equal(t, simnet.ImageID("kr1", "CentOS 7.9"), out["image_id"])
	var statuses []int
	for _, c := range s.srv.Journal.Calls("image", http.MethodGet, "/v2/images") {
		statuses = append(statuses, c.Status)
	}
	assert.Equal(t, []int{502, 200}, statuses)
}

// The looked-up values are the ones the cluster API accepts: a create fed
// by network.external and image.find succeeds on the simulator, which
// refuses unknown or mismatched references.
func TestACreateFedByTheLookupsIsAccepted(t *testing.T) {
	s := startSim(t)
	ext := s.run("network.external", nil)
	img := s.run("image.find", map[string]any{"name": "Rocky Linux 8.9"})
	fixed := s.run("network.list", map[string]any{"router_external": false})
	subs := s.run("network.subnets", map[string]any{"network_id": fixed["network_ids"].([]any)[0]})

	out := s.run("nks.cluster.create", map[string]any{
		"name": "lookups", "keypair": "k", "node_count": 1, "flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
		"fixed_network": fixed["network_ids"].([]any)[0], "fixed_subnet": subs["subnet_id_list"].([]any)[0],
		"labels": map[string]any{
			"availability_zone": "kr-pub-a", "node_image": img["image_id"], "boot_volume_type": "General SSD",
			"boot_volume_size": 50, "kube_tag": "v1.31.4", "master_lb_floating_ip_enabled": true,
			"external_network_id": ext["network_id"], "external_subnet_id_list": ext["subnet_id_list"],
		},
	})
	require.NotEmpty(t, out["uuid"])
	posts := s.srv.Journal.Calls("nks", http.MethodPost, "/v1/clusters")
	require.Len(t, posts, 1)
	assert.Contains(t, posts[0].Body, `"external_subnet_id_list":"`+simnet.PublicSubnet1ID+":"+simnet.PublicSubnet2ID+`"`)
	assert.Contains(t, posts[0].Body, `"node_image":"`+simnet.ImageID("kr1", "Rocky Linux 8.9")+`"`)

	_, err := s.try("nks.cluster.create", map[string]any{
		"name": "wrong", "keypair": "k", "node_count": 1, "flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
		"fixed_network": simnet.DefaultNetworkID, "fixed_subnet": simnet.DefaultSubnetID,
		"labels": map[string]any{
			"availability_zone": "kr-pub-a", "node_image": simnet.ImageID("kr2", "Rocky Linux 8.9"), "boot_volume_type": "General SSD",
			"boot_volume_size": 50, "kube_tag": "v1.31.4", "master_lb_floating_ip_enabled": true,
		},
	})
	assert.Error(t, err, "another region's image UUID is refused: the lookup matters")
}
