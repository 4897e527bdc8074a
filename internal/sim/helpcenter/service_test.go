package helpcenter_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

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

// signedGet sends GET path?query to the simulator signed over signPath as
// FIDELITY describes common authentication, written here from the spec
// alone (not the project's client).
func signedGet(t *testing.T, srv *sim.Server, path, signPath string, query url.Values) (int, map[string]any) {
	t.Helper()
	var names []string
	for n := range query {
		names = append(names, n)
	}
	sort.Strings(names)
	var vals []string
	for _, n := range names {
		vals = append(vals, query[n]...)
	}
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	mac := hmac.New(sha256.New, []byte(simhc.DefaultSecurityKey))
	mac.Write([]byte(simhc.DefaultOrgID + signPath + strings.Join(vals, "&") + ts))
	req, err := http.NewRequest("GET", srv.URL("helpcenter")+path+"?"+query.Encode(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	req.Header.Set("X-TC-Timestamp", ts)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

// A client outside the project signs the path the real host sees,
// /{serviceId}/api/v2/notice/list.json: the simulator's mount prefix
// (/helpcenter) is not part of it.
func TestTheListVerifiesTheSignatureOverThePathTheRealHostSees(t *testing.T) {
	srv, _ := startSim(t)
	path := "/" + simhc.DefaultServiceID + "/api/v2/notice/list.json"
	q := url.Values{"language": {"ko"}, "categoryId": {"1"}, "pageSize": {"3"}}
	code, body := signedGet(t, srv, path, path, q)
	require.Equal(t, 200, code, body)
	assert.Len(t, body["result"].(map[string]any)["contents"], 3)

	code, body = signedGet(t, srv, path, "/helpcenter"+path, q)
	assert.Equal(t, 400, code, "a signature over the simulator's own mount path is not what the real host checks")
	assert.Contains(t, body["header"].(map[string]any)["resultMessage"], "signature is wrong")
}
