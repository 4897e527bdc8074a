package network_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/cloud/network"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
	simnet "github.com/runbook/runbook/internal/sim/network"
	_ "github.com/runbook/runbook/internal/sim/nks"
)

// simEnv is the simulator (identity, nks, network, image) and a client
// built from its cluster connection, signing in through identity.
type simEnv struct {
	srv   *sim.Server
	c     *network.Client
	waits *[]time.Duration
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks", "network", "image"},
		Start: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	conn := s.Connections()["nks"]
	delete(conn, "token") // sign in through the identity endpoint
	icfg, err := identity.ConfigFrom(conn)
	require.NoError(t, err)
	icfg.Now = s.Clock.Now
	src, err := identity.New(icfg)
	require.NoError(t, err)
	cfg, err := network.ConfigFrom(conn, src)
	require.NoError(t, err)
	var mu sync.Mutex
	waits := &[]time.Duration{}
	cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
		return ctx.Err()
	}
	c, err := network.New(cfg)
	require.NoError(t, err)
	return &simEnv{srv: s, c: c, waits: waits}
}

func yes() *bool { b := true; return &b }

func TestTheInternetGatewayNetworkIsFoundWithTheSpecsQuery(t *testing.T) {
	e := startSim(t)
	nets, err := e.c.ListNetworks(context.Background(), network.NetworkFilter{RouterExternal: yes()})
	require.NoError(t, err)
	require.Len(t, nets, 1)
	assert.Equal(t, simnet.PublicNetworkID, nets[0].ID)
	assert.True(t, nets[0].RouterExternal)
	assert.Equal(t, "ACTIVE", nets[0].Status)
	assert.Equal(t, []string{simnet.PublicSubnet1ID, simnet.PublicSubnet2ID}, nets[0].Subnets)

	calls := e.srv.Journal.Calls("network", http.MethodGet, "/v2.0/networks")
	require.Len(t, calls, 1)
	assert.Equal(t, "router:external=True", calls[0].Query, "the query the spec shows")
}

func TestNetworksSubnetsAndImagesAreFilteredByTheAPI(t *testing.T) {
	e := startSim(t)
	ctx := context.Background()

	nets, err := e.c.ListNetworks(ctx, network.NetworkFilter{Name: "Default Network"})
	require.NoError(t, err)
	require.Len(t, nets, 1)
	assert.Equal(t, simnet.DefaultNetworkID, nets[0].ID)
	assert.False(t, nets[0].RouterExternal)

	n, err := e.c.GetNetwork(ctx, simnet.PublicNetworkID)
	require.NoError(t, err)
	assert.Equal(t, "Public Network", n.Name)

	subs, err := e.c.ListSubnets(ctx, network.SubnetFilter{NetworkID: simnet.PublicNetworkID})
	require.NoError(t, err)
	require.Len(t, subs, 2)
	assert.Equal(t, simnet.PublicSubnet1ID, subs[0].ID)
	assert.Equal(t, "133.186.0.0/24", subs[0].CIDR)
	assert.Equal(t, simnet.PublicNetworkID, subs[1].NetworkID)

	imgs, err := e.c.ListImages(ctx, network.ImageFilter{Name: "Ubuntu Server 22.04.3 LTS"})
	require.NoError(t, err)
	require.Len(t, imgs, 1)
	assert.Equal(t, simnet.DefaultUbuntu2204Image, imgs[0].ID)
	all, err := e.c.ListImages(ctx, network.ImageFilter{})
	require.NoError(t, err)
	assert.Len(t, all, len(simnet.BaseImages))
	q := e.srv.Journal.Calls("image", http.MethodGet, "/v2/images")[0].Query
	assert.Equal(t, "name=Ubuntu+Server+22.04.3+LTS", q)
}

func TestErrorsAreClassified(t *testing.T) {
	e := startSim(t)
	ctx := context.Background()

	_, err := e.c.GetNetwork(ctx, "no-such")
	var ne *network.Error
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, network.NotFound, ne.Class)
	assert.Equal(t, "NetworkNotFound", ne.Type)
	assert.Contains(t, err.Error(), "Network no-such could not be found.")

	e.srv.Faults.Add(sim.Fault{Service: "network", Status: 503, Count: 2})
	nets, err := e.c.ListNetworks(ctx, network.NetworkFilter{RouterExternal: yes()})
	require.NoError(t, err, "two 503s are retried")
	assert.Len(t, nets, 1)
	assert.Len(t, *e.waits, 2)

	e.srv.Faults.Add(sim.Fault{Service: "image", Status: 429, RetryAfter: 7})
	_, err = e.c.ListImages(ctx, network.ImageFilter{})
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, network.Throttled, ne.Class)
	assert.Contains(t, err.Error(), "gave up after 4 attempts")
	assert.Equal(t, 7*time.Second, (*e.waits)[len(*e.waits)-1], "Retry-After is honoured")
	e.srv.Faults.Clear()

	_, err = e.c.ListSubnets(ctx, network.SubnetFilter{})
	require.NoError(t, err)
}

// An identity token the service no longer accepts (revoked before it
// expired) is dropped and replaced once, and the call succeeds.
func TestA401RefreshesTheTokenOnce(t *testing.T) {
	e := startSim(t)
	ctx := context.Background()
	_, err := e.c.ListNetworks(ctx, network.NetworkFilter{})
	require.NoError(t, err)
	resp, err := http.Post(e.srv.URL("identity")+"/_admin/revoke", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	_, err = e.c.ListNetworks(ctx, network.NetworkFilter{})
	require.NoError(t, err)
	var statuses []int
	for _, c := range e.srv.Journal.Calls("network", http.MethodGet, "/v2.0/networks") {
		statuses = append(statuses, c.Status)
	}
	assert.Equal(t, []int{200, 401, 200}, statuses)
	assert.Len(t, e.srv.Journal.Calls("identity", http.MethodPost, "/v2.0/tokens"), 2, "one sign-in, one refresh")
}

type staticTokens string

func (s staticTokens) Token(context.Context) (string, error) { return string(s), nil }
func (staticTokens) Invalidate(string)                       {}

func TestARefusedStaticTokenIsNotResentAndIsUnauthorized(t *testing.T) {
	e := startSim(t)
	c, err := network.New(network.Config{NetworkURL: e.srv.URL("network"), ImageURL: e.srv.URL("image"), Tokens: staticTokens("wrong")})
	require.NoError(t, err)
	_, err = c.ListNetworks(context.Background(), network.NetworkFilter{})
	assert.Equal(t, network.Unauthorized, network.ClassOf(err), "%v", err)
	assert.Len(t, e.srv.Journal.Calls("network", "", "/v2.0/networks"), 1)
}

func TestBaseURLsDefaultPerRegion(t *testing.T) {
	for _, tc := range []struct{ region, network, image string }{
		{"", "https://kr1-api-network-infrastructure.nhncloudservice.com", "https://kr1-api-image-infrastructure.nhncloudservice.com"},
		{"KR2", "https://kr2-api-network-infrastructure.nhncloudservice.com", "https://kr2-api-image-infrastructure.nhncloudservice.com"},
		{"jp1", "https://jp1-api-network-infrastructure.nhncloudservice.com", "https://jp1-api-image-infrastructure.nhncloudservice.com"},
	} {
		t.Run("region "+tc.region, func(t *testing.T) {
			c, err := network.New(network.Config{Region: tc.region, Tokens: staticTokens("t")})
			require.NoError(t, err)
			assert.Equal(t, tc.network, c.NetworkURL())
			assert.Equal(t, tc.image, c.ImageURL())
		})
	}
	t.Run("a connection's URLs win over the region", func(t *testing.T) {
		cfg, err := network.ConfigFrom(map[string]any{"region": "kr2", "network_url": "http://127.0.0.1:1/network/"}, staticTokens("t"))
		require.NoError(t, err)
		c, err := network.New(cfg)
		require.NoError(t, err)
		assert.Equal(t, "http://127.0.0.1:1/network", c.NetworkURL())
		assert.Equal(t, "https://kr2-api-image-infrastructure.nhncloudservice.com", c.ImageURL())
	})
	t.Run("an unknown region names the known ones", func(t *testing.T) {
		_, err := network.New(network.Config{Region: "us1", Tokens: staticTokens("t")})
		assert.Equal(t, network.Invalid, network.ClassOf(err))
		assert.ErrorContains(t, err, "kr1, kr2, kr3, jp1")
	})
	t.Run("a URL without a host is refused", func(t *testing.T) {
		_, err := network.New(network.Config{ImageURL: "image.example", Tokens: staticTokens("t")})
		assert.Equal(t, network.Invalid, network.ClassOf(err))
		assert.ErrorContains(t, err, "image_url")
	})
	t.Run("a non-string setting is refused", func(t *testing.T) {
		_, err := network.ConfigFrom(map[string]any{"network_url": 3}, staticTokens("t"))
		assert.Equal(t, network.Invalid, network.ClassOf(err))
	})
}

// Glance pages its listing with a next link; every page is read.
func TestImageListingsFollowNextLinks(t *testing.T) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		page := map[string]any{"images": []any{map[string]any{"id": "i-1", "name": "a"}}, "next": "/v2/images?marker=i-1&name=a"}
		if r.URL.Query().Get("marker") == "i-1" {
			page = map[string]any{"images": []any{map[string]any{"id": "i-2", "name": "a"}}}
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	c, err := network.New(network.Config{ImageURL: srv.URL + "/image", Tokens: staticTokens("t")})
	require.NoError(t, err)
	imgs, err := c.ListImages(context.Background(), network.ImageFilter{Name: "a"})
	require.NoError(t, err)
	require.Len(t, imgs, 2)
	assert.Equal(t, "i-2", imgs[1].ID)
	assert.Equal(t, []string{"name=a", "marker=i-1&name=a"}, queries)
}

func TestPathsSpellFiltersAsTheSpecDoes(t *testing.T) {
	no := false
	assert.Equal(t, "/v2.0/networks?router:external=True", network.NetworksPath(network.NetworkFilter{RouterExternal: yes()}))
	assert.Equal(t, "/v2.0/networks?name=a+b&shared=False", network.NetworksPath(network.NetworkFilter{Name: "a b", Shared: &no}))
	assert.Equal(t, "/v2.0/subnets?network_id=n-1", network.SubnetsPath(network.SubnetFilter{NetworkID: "n-1"}))
	assert.True(t, strings.HasPrefix(network.ImagesPath(network.ImageFilter{Name: "Rocky Linux 8.9"}), "/v2/images?name=Rocky+Linux+8.9"))
}
