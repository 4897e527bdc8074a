package nks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/nks"
)

// env is a running simulator with identity and nks, and the static token.
type env struct {
	t     *testing.T
	srv   *sim.Server
	base  string
	token string
}

func start(t *testing.T) *env {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{
		Services: []string{"identity", "nks"},
		Start:    time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	conn := s.Connections()["nks"]
	return &env{t: t, srv: s, base: conn["base_url"].(string), token: conn["token"].(string)}
}

func (e *env) svc() *nks.Service { return e.srv.Service("nks").(*nks.Service) }

// response is a decoded answer.
type response struct {
	status int
	body   map[string]any
	raw    string
}

// do sends a request with the common headers (token, OpenStack-API-Version)
// unless hdr overrides them; an empty value removes a header.
func (e *env) do(method, path string, body any, hdr ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = bytes.NewBufferString(s)
		} else {
			b, err := json.Marshal(body)
			require.NoError(e.t, err)
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Token", e.token)
	req.Header.Set("OpenStack-API-Version", "container-infra latest")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	out := response{status: resp.StatusCode, raw: string(b)}
	if len(bytes.TrimSpace(b)) > 0 {
		require.NoError(e.t, json.Unmarshal(b, &out.body), string(b))
	}
	return out
}

// mustDo sends a request and requires the status.
func (e *env) mustDo(status int, method, path string, body any, hdr ...string) map[string]any {
	e.t.Helper()
	r := e.do(method, path, body, hdr...)
	require.Equal(e.t, status, r.status, "%s %s: %s", method, path, r.raw)
	return r.body
}

// apiError returns the status and detail of a Magnum error answer.
func apiError(t *testing.T, r response) (int, string) {
	t.Helper()
	errs, ok := r.body["errors"].([]any)
	require.True(t, ok, "not a Magnum error body: %s", r.raw)
	require.Len(t, errs, 1)
	e := errs[0].(map[string]any)
	require.Equal(t, float64(r.status), e["status"])
	require.Contains(t, e, "request_id")
	require.Contains(t, e, "links")
	require.NotEmpty(t, e["title"])
	code := "client"
	if r.status >= 500 {
		code = "server"
	}
	require.Equal(t, code, e["code"])
	return r.status, e["detail"].(string)
}

// createBody is a valid cluster create request; change modifies it.
func createBody(name string, change func(body, labels map[string]any)) map[string]any {
	labels := map[string]any{
		"availability_zone": "kr-pub-a", "node_image": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
		"boot_volume_type": "General HDD", "boot_volume_size": "50", "cert_manager_api": "True",
		"ca_enable": "False", "kube_tag": "v1.29.3", "master_lb_floating_ip_enabled": "True",
		"clusterautoscale": "nodegroupfeature",
	}
	body := map[string]any{
		"name": name, "keypair": "ops-key", "cluster_template_id": "iaas_console", "node_count": 2,
		"flavor_id":     "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
		"fixed_network": "a1b2c3d4-0000-4000-8000-000000000001", "fixed_subnet": "a1b2c3d4-0000-4000-8000-000000000002",
		"create_timeout": 60, "labels": labels,
	}
	if change != nil {
		change(body, labels)
	}
	return body
}

// createCluster creates a cluster and lets its creation finish.
func (e *env) createCluster(name string, change func(body, labels map[string]any)) string {
	e.t.Helper()
	out := e.mustDo(202, "POST", "/v1/clusters", createBody(name, change))
	e.srv.Clock.Advance(nks.DefaultDurations["CLUSTER_CREATE"])
	return out["uuid"].(string)
}

// events returns the task history of a cluster.
func (e *env) events(clusterUUID string) []map[string]any {
	e.t.Helper()
	out := e.mustDo(200, "GET", "/v1/clusters/"+clusterUUID+"/events", nil)
	var evs []map[string]any
	for _, ev := range out["events"].([]any) {
		evs = append(evs, ev.(map[string]any))
	}
	return evs
}

// lastEvent returns the newest task of a type.
func (e *env) lastEvent(clusterUUID, typ string) map[string]any {
	e.t.Helper()
	var last map[string]any
	for _, ev := range e.events(clusterUUID) {
		if ev["type"] == typ {
			last = ev
		}
	}
	require.NotNil(e.t, last, "no %s event", typ)
	return last
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
