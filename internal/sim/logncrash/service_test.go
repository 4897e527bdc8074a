package logncrash_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	simlnc "github.com/runbook/runbook/internal/sim/logncrash"
)

func TestTheCollectorValidatesAndRecords(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"logncrash"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	svc := srv.Service("logncrash").(*simlnc.Service)
	base := srv.URL("logncrash")
	post := func(body string) (int, map[string]any) {
		resp, err := http.Post(base+"/v2/log", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var env struct {
			Header map[string]any `json:"header"`
		}
		b, _ := io.ReadAll(resp.Body)
		require.NoError(t, json.Unmarshal(b, &env), string(b))
		return resp.StatusCode, env.Header
	}
	good := `{"projectName":"` + svc.AppKey() + `","projectVersion":"1.0.0","logVersion":"v2","body":"hi","logLevel":"INFO","custom_1":"x"}`
	cases := []struct {
		name, body string
		status     int
		code       float64
	}{
		{"a good log", good, 200, 0},
		{"an array of logs", "[" + good + "," + good + "]", 200, 0},
		{"not JSON", "{", 400, simlnc.CodeBadBody},
		{"an unknown appkey", strings.Replace(good, svc.AppKey(), "other", 1), 400, simlnc.CodeBadAppKey},
		{"another logVersion", strings.Replace(good, `"v2"`, `"v1"`, 1), 400, simlnc.CodeBadField},
		{"an empty body", strings.Replace(good, `"hi"`, `""`, 1), 400, simlnc.CodeBadField},
		{"a bad level", strings.Replace(good, `"INFO"`, `"LOUD"`, 1), 400, simlnc.CodeBadField},
		{"a bad field name", strings.Replace(good, `custom_1`, `custom-1`, 1), 400, simlnc.CodeBadField},
	}
	for _, c := range cases {
		t.Run(c.name+" answers "+http.StatusText(c.status), func(t *testing.T) {
			status, h := post(c.body)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.status == 200, h["isSuccessful"])
			assert.Equal(t, c.code, h["resultCode"])
		})
	}
	assert.Len(t, svc.Logs(), 3, "only accepted logs are recorded")

	resp, err := http.Get(base + "/_admin/logs")
	require.NoError(t, err)
	var logs []simlnc.Entry
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&logs))
	resp.Body.Close()
	assert.Len(t, logs, 3)
	assert.Equal(t, "x", logs[0].Log["custom_1"])
}
