package logncrash_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/logncrash"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	simlnc "github.com/runbook/runbook/internal/sim/logncrash"
)

func start(t *testing.T) (*sim.Server, *simlnc.Service, *logncrash.Client) {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"logncrash"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cfg, err := logncrash.ConfigFrom(srv.Connections()["logncrash"])
	require.NoError(t, err)
	cfg.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	cl, err := logncrash.New(cfg)
	require.NoError(t, err)
	return srv, srv.Service("logncrash").(*simlnc.Service), cl
}

func TestALogWithCustomFieldsIsRecorded(t *testing.T) {
	_, svc, cl := start(t)
	err := cl.Send(context.Background(), logncrash.Log{Message: "epoch 3 done", Level: "warn", Host: "trainer-1",
		Fields: map[string]any{"epoch": int64(3), "loss": 0.25, "run_id": "r-1", "tags": []any{"a", "b"}}})
	require.NoError(t, err)
	logs := svc.Logs()
	require.Len(t, logs, 1)
	l := logs[0].Log
	assert.Equal(t, svc.AppKey(), l["projectName"])
	assert.Equal(t, "1.0.0", l["projectVersion"])
	assert.Equal(t, "v2", l["logVersion"])
	assert.Equal(t, "epoch 3 done", l["body"])
	assert.Equal(t, "WARN", l["logLevel"])
	assert.Equal(t, "trainer-1", l["host"])
	assert.Equal(t, json.Number("3"), l["epoch"])
	assert.Equal(t, json.Number("0.25"), l["loss"])
	assert.Equal(t, "r-1", l["run_id"])
	assert.Equal(t, `["a","b"]`, l["tags"], "lists are sent as their JSON text")
}

func TestRefusalsAreClassified(t *testing.T) {
	srv, svc, cl := start(t)
	ctx := context.Background()
	cases := []struct {
		name string
		log  logncrash.Log
		want string
	}{
		{"an empty message", logncrash.Log{Message: " "}, "message is empty"},
		{"an unknown level", logncrash.Log{Message: "m", Level: "TRACE"}, "level"},
		{"a reserved field", logncrash.Log{Message: "m", Fields: map[string]any{"Host": "x"}}, "reserved"},
		{"a field with a dash", logncrash.Log{Message: "m", Fields: map[string]any{"run-id": "x"}}, "letters, digits and _"},
	}
	for _, c := range cases {
		t.Run(c.name+" is invalid and not sent", func(t *testing.T) {
			err := cl.Send(ctx, c.log)
			require.Error(t, err)
			assert.Equal(t, fault.Invalid, fault.CodeOf(err))
			assert.Contains(t, err.Error(), c.want)
		})
	}
	assert.Empty(t, srv.Journal.Calls("logncrash", "", ""))

	t.Run("an unknown appkey is refused by the collector", func(t *testing.T) {
		bad, err := logncrash.New(logncrash.Config{BaseURL: srv.URL("logncrash"), AppKey: "nope"})
		require.NoError(t, err)
		err = bad.Send(ctx, logncrash.Log{Message: "m"})
		require.Error(t, err)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "Invalid appkey")
	})
	t.Run("429 and 503 are retried", func(t *testing.T) {
		srv.Faults.Add(sim.Fault{Service: "logncrash", Status: http.StatusTooManyRequests, Count: 1})
		srv.Faults.Add(sim.Fault{Service: "logncrash", Status: http.StatusServiceUnavailable, Count: 1})
		require.NoError(t, cl.Send(ctx, logncrash.Log{Message: "after faults"}))
		assert.Equal(t, "after faults", svc.Logs()[len(svc.Logs())-1].Log["body"])
	})
	t.Run("a missing appkey is refused before any call", func(t *testing.T) {
		_, err := logncrash.New(logncrash.Config{})
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	})
}
