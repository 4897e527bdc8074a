package conformance_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A notice-list request signed exactly as FIDELITY describes common
// authentication (written from that text, not with the project's client):
// organization ID + the request path as the real host sees it + the query
// values ordered by parameter name joined with "&" + the timestamp.
func TestAHelpCenterRequestSignedFromTheSpecAloneIsAccepted(t *testing.T) {
	s := start(t)
	conn := s.Connections()["helpcenter"]
	org, key, svc := conn["org_id"].(string), conn["security_key"].(string), conn["service_id"].(string)
	path := "/" + svc + "/api/v2/notice/list.json"
	query := url.Values{"pageSize": {"5"}, "language": {"ko"}, "categoryId": {"1"}, "sort": {"displayDt:desc"}}

	names := make([]string, 0, len(query))
	for n := range query {
		names = append(names, n)
	}
	sort.Strings(names) // categoryId, language, pageSize, sort
	values := make([]string, 0, len(names))
	for _, n := range names {
		values = append(values, query.Get(n))
	}
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(org + path + strings.Join(values, "&") + ts))

	req, err := http.NewRequest(http.MethodGet, s.URL("helpcenter")+path+"?"+query.Encode(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	req.Header.Set("X-TC-Timestamp", ts)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Header struct {
			ResultCode    int    `json:"resultCode"`
			ResultMessage string `json:"resultMessage"`
			IsSuccessful  bool   `json:"isSuccessful"`
		} `json:"header"`
		Result struct {
			Contents []map[string]any `json:"contents"`
			PageSize int              `json:"pageSize"`
		} `json:"result"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, 200, resp.StatusCode, body.Header.ResultMessage)
	assert.True(t, body.Header.IsSuccessful)
	assert.Equal(t, 200, body.Header.ResultCode)
	assert.Equal(t, 5, body.Result.PageSize)
	for _, n := range body.Result.Contents {
		assert.Equal(t, 1.0, n["categoryId"])
	}
}
