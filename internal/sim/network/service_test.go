package network_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/network"
	_ "github.com/runbook/runbook/internal/sim/nks"
)

func get(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func ids(list any) []string {
	var out []string
	for _, x := range list.([]any) {
		out = append(out, x.(map[string]any)["id"].(string))
	}
	return out
}

// The spec's lookup: GET /v2.0/networks?router:external=True finds the
// internet-gateway network, whose subnets are listed by network_id.
func TestTheInternetGatewayNetworkAndItsSubnetsAreFoundAsTheSpecShows(t *testing.T) {
	s, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "network", "image"}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	base, tok := s.URL("network"), s.Service("network").(*network.Service).Token()

	code, out := get(t, base+"/v2.0/networks?router:external=True", tok)
	require.Equal(t, 200, code, out)
	require.Equal(t, []string{network.PublicNetworkID}, ids(out["networks"]))
	n := out["networks"].([]any)[0].(map[string]any)
	assert.Equal(t, true, n["router:external"])
	assert.Equal(t, []any{network.PublicSubnet1ID, network.PublicSubnet2ID}, n["subnets"])

	_, out = get(t, base+"/v2.0/networks/?router:external=false", tok)
	assert.Equal(t, []string{network.DefaultNetworkID}, ids(out["networks"]), "a trailing slash and a lower-case boolean work too")
	_, out = get(t, base+"/v2.0/subnets?network_id="+network.PublicNetworkID, tok)
	assert.Equal(t, []string{network.PublicSubnet1ID, network.PublicSubnet2ID}, ids(out["subnets"]))
	_, out = get(t, base+"/v2.0/networks?name=Default+Network", tok)
	assert.Equal(t, []string{network.DefaultNetworkID}, ids(out["networks"]))

	code, out = get(t, base+"/v2.0/networks/no-such", tok)
	assert.Equal(t, 404, code)
	assert.Equal(t, "NetworkNotFound", out["NeutronError"].(map[string]any)["type"])
	code, _ = get(t, base+"/v2.0/networks", "")
	assert.Equal(t, 401, code)

	code, out = get(t, s.URL("image")+"/v2/images?name=Ubuntu+Server+22.04.3+LTS", s.Service("image").(*network.Service).Token())
	require.Equal(t, 200, code, out)
	assert.Equal(t, []string{network.DefaultUbuntu2204Image}, ids(out["images"]))
	_, out = get(t, s.URL("image")+"/v2/images", s.Service("image").(*network.Service).Token())
	assert.Len(t, out["images"], len(network.BaseImages))
}

func TestEachRegionHasItsOwnImageUUIDs(t *testing.T) {
	for _, name := range network.BaseImages {
		assert.NotEqual(t, network.ImageID("kr1", name), network.ImageID("kr2", name), name)
	}
}

// The network.* steps reach these services with the cluster connection, so
// the cluster simulator's static token is accepted; another is not.
func TestTheClusterConnectionsTokenIsAcceptedAndAnUnknownOneIsNot(t *testing.T) {
	s, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks", "network", "image"}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	nksTok := s.Connections()["nks"]["token"].(string)
	for _, u := range []string{s.URL("network") + "/v2.0/networks", s.URL("image") + "/v2/images"} {
		code, out := get(t, u, nksTok)
		assert.Equal(t, 200, code, "%s: %v", u, out)
		code, _ = get(t, u, "sim-nks-token-2")
		assert.Equal(t, 401, code, "%s with another seed's token", u)
	}
}
