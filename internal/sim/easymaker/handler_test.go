package easymaker_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/sim"
	simem "github.com/runbook/runbook/internal/sim/easymaker"
)

// The handler also runs outside a sim.Server (httptest): stage URLs then
// point at the request's host.
func TestTheHandlerServesPredictUnderHttptest(t *testing.T) {
	clock := sim.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 1)
	svc, err := simem.New(&sim.Env{Clock: clock, Journal: &sim.Journal{}, Faults: &sim.Faults{}, Seed: 7})
	require.NoError(t, err)
	ts := httptest.NewServer(svc.Handler())
	t.Cleanup(ts.Close)
	cfg, err := em.ConfigFrom(svc.Connection(ts.URL))
	require.NoError(t, err)
	c, err := em.New(cfg)
	require.NoError(t, err)
	ctx := context.Background()

	m, err := c.CreateModel(ctx, em.CreateModelRequest{ModelName: "m", ModelURI: "obs://h/v1/AUTH_t/c/m", FrameworkCode: em.FrameworkPyTorch})
	require.NoError(t, err)
	clock.Advance(time.Minute)
	ep, err := c.CreateEndpoint(ctx, em.CreateEndpointRequest{EndpointName: "e", FlavorID: "flv-00000000-0001",
		EndpointModelResourceList: []em.ModelResource{{ModelID: m.ModelID, APIGWResourceURI: "/m", PodCount: 1}}})
	require.NoError(t, err)
	clock.Advance(5 * time.Minute)
	st, err := c.DefaultStage(ctx, ep.EndpointID)
	require.NoError(t, err)
	assert.Equal(t, ts.URL+"/_stage/"+st.EndpointStageID, st.APIGWStageURL)
	out, err := c.Predict(ctx, st, "/m", map[string]any{"instances": [][]float64{{2}}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"predictions": [`+jsonNum(simem.Predict(7, m.ModelID, []float64{2}))+`]}`, string(out))
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}
