package nks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
)

// magnum answers status with the Magnum error body.
func magnum(status int, title, detail string) answer {
	code := "client"
	if status >= 500 {
		code = "server"
	}
	b, _ := json.Marshal(map[string]any{"errors": []map[string]any{{
		"request_id": "req-1", "code": code, "status": status, "title": title, "detail": detail, "links": []any{},
	}}})
	return answer{status: status, body: string(b)}
}

var ok200 = answer{status: 200, body: `{"clusters":[]}`}

func TestAGetIsRetriedOnAServerErrorThenSucceeds(t *testing.T) {
	c, f, _, slept := newClient(t, magnum(503, "Service Unavailable", "try later"), ok200)
	_, err := c.ListClusters(context.Background())
	require.NoError(t, err)
	assert.Len(t, f.requests(), 2)
	require.Len(t, *slept, 1)
	assert.True(t, (*slept)[0] >= baseBackoff/2 && (*slept)[0] <= baseBackoff, "backoff %v", (*slept)[0])
}

func TestAGetHonoursRetryAfterOnA429(t *testing.T) {
	c, f, _, slept := newClient(t, answer{status: 429, body: `{}`, header: map[string]string{"Retry-After": "7"}}, ok200)
	_, err := c.ListClusters(context.Background())
	require.NoError(t, err)
	assert.Len(t, f.requests(), 2)
	assert.Equal(t, []time.Duration{7 * time.Second}, *slept)
}

func TestAGetGivesUpAfterMaxAttemptsWithGrowingWaits(t *testing.T) {
	c, f, _, slept := newClient(t, magnum(502, "Bad Gateway", "upstream"))
	_, err := c.ListClusters(context.Background())
	require.Error(t, err)
	assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "gave up after 4 attempts")
	assert.Len(t, f.requests(), 4)
	require.Len(t, *slept, 3)
	assert.True(t, (*slept)[2] >= 2*baseBackoff, "third wait %v should be at least %v", (*slept)[2], 2*baseBackoff)
}

func TestAGetIsRetriedAfterANetworkError(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		w.Write([]byte(`{"clusters":[{"uuid":"u"}]}`))
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL, Tokens: &tokens{}, Sleep: func(context.Context, time.Duration) error { return nil }})
	require.NoError(t, err)
	cs, err := c.ListClusters(context.Background())
	require.NoError(t, err)
	assert.Len(t, cs, 1)
	assert.EqualValues(t, 2, calls.Load())
}

func TestAMutatingCallIsNeverRepeatedAfterAServerError(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(c *Client) error
	}{
		{"a create", func(c *Client) error {
			_, err := c.CreateCluster(context.Background(), CreateClusterRequest{Name: "a"})
			return err
		}},
		{"an upgrade", func(c *Client) error {
			_, err := c.UpgradeNodeGroup(context.Background(), "a", "b", UpgradeRequest{Version: "v1.28.3"})
			return err
		}},
		{"a delete", func(c *Client) error { return c.DeleteCluster(context.Background(), "a") }},
		{"a flavor change", func(c *Client) error {
			_, err := c.ChangeFlavor(context.Background(), "a", "b", FlavorChangeRequest{FlavorID: "f"})
			return err
		}},
	} {
		t.Run(tc.name+" is sent once on 503", func(t *testing.T) {
			c, f, _, slept := newClient(t, magnum(503, "Service Unavailable", "boom"), answer{status: 202, body: `{"uuid":"x"}`})
			err := tc.call(c)
			require.Error(t, err)
			assert.Len(t, f.requests(), 1)
			assert.Empty(t, *slept)
			var se *fault.Error
			require.True(t, errors.As(err, &se))
			assert.Equal(t, fault.Unavailable, se.Code)
			assert.Equal(t, true, se.Data["ambiguous"])
		})
	}
	t.Run("a create is sent once after a dropped connection", func(t *testing.T) {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}))
		defer srv.Close()
		c, err := New(Config{BaseURL: srv.URL, Tokens: &tokens{}, Sleep: func(context.Context, time.Duration) error { return nil },
			HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
		require.NoError(t, err)
		_, err = c.CreateCluster(context.Background(), CreateClusterRequest{Name: "a"})
		require.Error(t, err)
		assert.Equal(t, fault.Unavailable, fault.CodeOf(err))
		assert.EqualValues(t, 1, calls.Load())
	})
}

func TestAMutatingCallIsRepeatedOnA429(t *testing.T) {
	c, f, _, slept := newClient(t, answer{status: 429, body: `{}`, header: map[string]string{"Retry-After": "2"}}, answer{status: 202, body: `{"uuid":"c1"}`})
	id, err := c.CreateCluster(context.Background(), CreateClusterRequest{Name: "a"})
	require.NoError(t, err)
	assert.Equal(t, "c1", id)
	assert.Len(t, f.requests(), 2)
	assert.Equal(t, []time.Duration{2 * time.Second}, *slept)
}

func TestA401RefreshesTheTokenOnce(t *testing.T) {
	t.Run("the retry carries the new token", func(t *testing.T) {
		c, f, toks, _ := newClient(t, magnum(401, "Unauthorized", "token expired"), answer{status: 202, body: `{"uuid":"c1"}`})
		id, err := c.CreateCluster(context.Background(), CreateClusterRequest{Name: "a"})
		require.NoError(t, err)
		assert.Equal(t, "c1", id)
		reqs := f.requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, "tok-1", reqs[0].Header.Get("X-Auth-Token"))
		assert.Equal(t, "tok-2", reqs[1].Header.Get("X-Auth-Token"))
		assert.Equal(t, []string{"tok-1"}, toks.invalidated)
	})
	t.Run("a second 401 is final", func(t *testing.T) {
		c, f, _, _ := newClient(t, magnum(401, "Unauthorized", "nope"))
		_, err := c.ListClusters(context.Background())
		require.Error(t, err)
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.Len(t, f.requests(), 2)
	})
	t.Run("a static token is not resent", func(t *testing.T) {
		c, f, toks, _ := newClient(t, magnum(401, "Unauthorized", "nope"))
		toks.static = true
		_, err := c.ListClusters(context.Background())
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.Len(t, f.requests(), 1)
	})
}

func TestErrorsAreParsedAndClassified(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ans    answer
		code   fault.Code
		title  string
		detail string
	}{
		{"a bad tag is invalid", magnum(400, "Bad Request", "Received invalid tag for kube_tag."), fault.Invalid, "Bad Request", "Received invalid tag for kube_tag."},
		{"the last node group is invalid", magnum(400, "Bad Request", "Deleting the last nodegroup is not supported."), fault.Invalid, "Bad Request", "Deleting the last nodegroup is not supported."},
		{"an operation in progress is in_progress", magnum(400, "Bad Request", "Cluster prod is in progress of UPDATE_IN_PROGRESS."), fault.InProgress, "Bad Request", "Cluster prod is in progress of UPDATE_IN_PROGRESS."},
		{"a missing cluster is not_found", magnum(404, "Not Found", "Cluster prod could not be found."), fault.NotFound, "Not Found", "Cluster prod could not be found."},
		{"a taken name is a conflict", magnum(409, "Conflict", "A cluster with name prod already exists."), fault.Conflict, "Conflict", "A cluster with name prod already exists."},
		{"a refused token is unauthorized", magnum(401, "Unauthorized", "The request you have made requires authentication."), fault.Unauthorized, "Unauthorized", "The request you have made requires authentication."},
		{"a policy refusal is unauthorized", magnum(403, "Forbidden", "Policy doesn't allow nodegroup:get to be performed."), fault.Unauthorized, "Forbidden", "Policy doesn't allow nodegroup:get to be performed."},
		{"a missing version header is invalid", magnum(406, "Not Acceptable", "Invalid service type for OpenStack-API-Version header"), fault.Invalid, "Not Acceptable", "Invalid service type for OpenStack-API-Version header"},
		{"a rate limit is throttled", magnum(429, "Too Many Requests", "slow down"), fault.Throttled, "Too Many Requests", "slow down"},
		{"a server error is unavailable", magnum(500, "Internal Server Error", "oops"), fault.Unavailable, "Internal Server Error", "oops"},
		{"a pecan error_message is read", answer{status: 400, body: `{"error_message":"{\"faultstring\": \"Invalid input for field/attribute node_count.\", \"debuginfo\": null}"}`},
			fault.Invalid, "", "Invalid input for field/attribute node_count."},
		{"a text body is kept", answer{status: 502, body: "<html>bad gateway</html>"}, fault.Unavailable, "", "<html>bad gateway</html>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _, _ := newClient(t, tc.ans)
			_, err := c.GetCluster(context.Background(), "prod")
			require.Error(t, err)
			var se *fault.Error
			require.True(t, errors.As(err, &se), "a *fault.Error is in the chain")
			assert.Equal(t, tc.code, se.Code)
			var ae *APIError
			require.True(t, errors.As(err, &ae), "an *APIError is in the chain")
			assert.Equal(t, tc.ans.status, ae.Status)
			assert.Equal(t, tc.title, ae.Title)
			assert.Equal(t, tc.detail, ae.Detail)
			assert.Equal(t, "GET /v1/clusters/prod", ae.Op)
			assert.Contains(t, err.Error(), tc.detail)
		})
	}
	t.Run("the Magnum fields are all read", func(t *testing.T) {
		ae := parseAPIError("op", 400, []byte(`{"errors":[{"request_id":"r9","code":"client","status":400,"title":"Bad Request","detail":"d","links":[]}]}`))
		assert.Equal(t, &APIError{Op: "op", Status: 400, Code: "client", Title: "Bad Request", Detail: "d", RequestID: "r9"}, ae)
	})
	t.Run("a 406 message names the version header", func(t *testing.T) {
		assert.Contains(t, (&APIError{Op: "GET /v1/supports", Status: 406}).Error(), "OpenStack-API-Version: container-infra latest")
	})
}

func TestCancellingStopsTheRetries(t *testing.T) {
	f := &fake{answers: []answer{magnum(503, "x", "y")}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := New(Config{BaseURL: srv.URL, Tokens: &tokens{}, Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }})
	require.NoError(t, err)
	_, err = c.ListClusters(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, f.requests(), 1)
}

func TestEmptyIdentifiersAreRefusedBeforeAnyRequest(t *testing.T) {
	c, f, _, _ := newClient(t, ok200)
	_, err := c.GetNodeGroup(context.Background(), "prod", " ")
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	_, err = c.GetTask(context.Background(), "", "e")
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.Empty(t, f.requests())
}

func TestLatestEventFindsTheTaskOfTheCall(t *testing.T) {
	events := `{"events":[
	 {"id":1,"resource_uuid":"g1","type":"NODEGROUP_UPGRADE","state":"FAIL","created_at":"2024-03-01T02:00:00+00:00"},
	 {"id":2,"resource_uuid":"g1","type":"NODEGROUP_UPGRADE","state":"IN_PROGRESS","created_at":"2024-03-01T03:00:05"},
	 {"id":3,"resource_uuid":"g1","type":"CLUSTER_RESIZE","state":"IN_PROGRESS","created_at":"2024-03-01T03:00:09+00:00"},
	 {"id":4,"resource_uuid":"g2","type":"NODEGROUP_UPGRADE","state":"IN_PROGRESS","created_at":"2024-03-01T03:00:10+00:00"}]}`
	c, f, _, _ := newClient(t, answer{status: 200, body: events})
	requested := time.Date(2024, 3, 1, 3, 0, 5, 600e6, time.UTC) // the service truncates to seconds
	task, err := c.LatestEvent(context.Background(), "u1", "g1", EventNodeGroupUpgrade, requested)
	require.NoError(t, err)
	require.NotNil(t, task)
	assert.Equal(t, 2, task.ID)
	assert.Equal(t, "/nks/v1/clusters/u1/events", f.requests()[0].Path)

	t.Run("no task yet is nil", func(t *testing.T) {
		task, err := c.LatestEvent(context.Background(), "u1", "g1", EventNodeGroupUpgrade, requested.Add(time.Minute))
		require.NoError(t, err)
		assert.Nil(t, task)
	})
	t.Run("a zero time takes the newest of any age", func(t *testing.T) {
		var list struct{ Events []Task }
		require.NoError(t, jsonUnmarshal(events, &list))
		assert.Equal(t, 3, NewestTask(list.Events, "g1", "", time.Time{}).ID)
	})
	t.Run("an empty resource matches any resource", func(t *testing.T) {
		var list struct{ Events []Task }
		require.NoError(t, jsonUnmarshal(events, &list))
		assert.Equal(t, 4, NewestTask(list.Events, "", EventNodeGroupUpgrade, requested).ID)
	})
}

func TestBaseURLs(t *testing.T) {
	for _, tc := range []struct{ name, region, base, want, err string }{
		{"kr1 is the default", "", "", "https://kr1-api-kubernetes-infrastructure.nhncloudservice.com", ""},
		{"kr2 has its own host", "KR2", "", "https://kr2-api-kubernetes-infrastructure.nhncloudservice.com", ""},
		{"a base URL overrides the region", "kr2", "http://127.0.0.1:9/nks/", "http://127.0.0.1:9/nks", ""},
		{"an unknown region is refused", "us1", "", "", `unknown region "us1"`},
		{"a base URL without a scheme is refused", "", "example.com", "", "must be an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Region: tc.region, BaseURL: tc.base, Tokens: &tokens{}})
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Equal(t, fault.Invalid, fault.CodeOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.BaseURL())
		})
	}
	t.Run("a client needs a token source", func(t *testing.T) {
		_, err := New(Config{})
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	})
}

func TestConfigFromReadsTheConnection(t *testing.T) {
	toks := &tokens{}
	cfg, err := ConfigFrom(map[string]any{"region": "kr2", "base_url": nil, "token": "ignored here"}, toks)
	require.NoError(t, err)
	assert.Equal(t, "kr2", cfg.Region)
	assert.Same(t, toks, cfg.Tokens)
	_, err = ConfigFrom(map[string]any{"region": "mars"}, toks)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	_, err = ConfigFrom(map[string]any{"base_url": 3}, toks)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
}

func TestParseTime(t *testing.T) {
	want := time.Date(2024, 2, 27, 6, 12, 15, 0, time.UTC)
	for _, s := range []string{"2024-02-27T06:12:15+00:00", "2024-02-27T06:12:15Z", "2024-02-27T06:12:15", "2024-02-27T06:12:15.000000", "2024-02-27 06:12:15", "2024-02-27T15:12:15+09:00"} {
		t.Run(s+" is read", func(t *testing.T) {
			got, err := ParseTime(s)
			require.NoError(t, err)
			assert.True(t, want.Equal(got), got)
		})
	}
	t.Run("garbage is refused", func(t *testing.T) {
		_, err := ParseTime("yesterday")
		assert.Error(t, err)
	})
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
