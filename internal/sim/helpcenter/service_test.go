package helpcenter_test

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
	simhc "github.com/runbook/runbook/internal/sim/helpcenter"
)

func startSim(t *testing.T) (*sim.Server, string) {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"helpcenter"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv, srv.URL("helpcenter") + "/" + simhc.DefaultServiceID + "/api/v2/notice/"
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

func TestUnauthenticatedListAnswersTheDocumentedEnvelope(t *testing.T) {
	_, base := startSim(t)
	code, body := getJSON(t, base+"list.json")
	assert.Equal(t, 400, code)
	h := body["header"].(map[string]any)
	assert.Equal(t, false, h["isSuccessful"])
	assert.Equal(t, 400.0, h["resultCode"])
	assert.Contains(t, h["resultMessage"], "Authorization")
}

func TestDetailFieldsKeepTheSpecsLiteralTypes(t *testing.T) {
	srv, base := startSim(t)
	svc := srv.Service("helpcenter").(*simhc.Service)
	plain, err := svc.AddNotice(simhc.NewNotice{Title: "untagged", DisplayDt: "20260101120000"})
	require.NoError(t, err)
	_, body := getJSON(t, base+"detail/"+itoa(plain)+".json")
	c := body["result"].(map[string]any)["content"].(map[string]any)
	assert.Equal(t, "2026.01.01", c["displayDt"], "the dotted form of the samples")
	assert.Equal(t, "N", c["attachmentYn"], "a Y-style flag")
	assert.Equal(t, "false", c["isNew"], "a string")
	assert.IsType(t, 0.0, c["updatedDt"])
	assert.Equal(t, 1.0, c["readCnt"])
	_, body = getJSON(t, base+"detail/"+itoa(plain)+".json")
	assert.Equal(t, 2.0, body["result"].(map[string]any)["content"].(map[string]any)["readCnt"])
}

func TestAdminAddsNoticesOverHTTPAndResets(t *testing.T) {
	srv, _ := startSim(t)
	svc := srv.Service("helpcenter").(*simhc.Service)
	require.Equal(t, simhc.DefaultNotices, svc.Count())
	resp, err := http.Post(srv.URL("helpcenter")+"/_admin/notices", "application/json",
		strings.NewReader(`{"title":"New GPU flavors","content":"<p>now</p>","categoryId":3,"tags":[9],"attachments":[{"fileName":"a.txt","text":"hi"}]}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"isNew":"true"`)
	assert.Contains(t, string(b), `"attachmentYn":"Y"`)
	assert.Equal(t, simhc.DefaultNotices+1, svc.Count())

	resp, err = http.Post(srv.URL("helpcenter")+"/_admin/notices", "application/json", strings.NewReader(`{"title":"x","categoryId":99}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode)

	resp, err = http.Post(srv.URL("helpcenter")+"/_admin/reset", "application/json", strings.NewReader(`{"notices":450}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 450, svc.Count())
	assert.Empty(t, srv.Journal.Calls("helpcenter", "", ""), "admin calls are not journaled")
}

func TestGeneratedDataIsReproducibleFromTheSeed(t *testing.T) {
	srv1, base1 := startSim(t)
	_, base2 := startSim(t)
	_ = srv1
	_, a := getJSON(t, base1+"detail/1100.json?language=th")
	_, b := getJSON(t, base2+"detail/1100.json?language=th")
	ca, cb := a["result"].(map[string]any)["content"], b["result"].(map[string]any)["content"]
	assert.Equal(t, ca.(map[string]any)["title"], cb.(map[string]any)["title"])
	assert.NotEmpty(t, ca.(map[string]any)["title"])
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
