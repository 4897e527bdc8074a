package helpcenter

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Sign computes the common-authentication signature (the Authorization
// header): Base64(HMAC-SHA256(key, orgID + path + values + timestamp)),
// where path is the request path without host or query and values are the
// query parameter values ordered by parameter name and joined with "&"
// (several values of one name keep their order). timestampMillis is the
// X-TC-Timestamp value.
func Sign(key, orgID, path string, query url.Values, timestampMillis int64) string {
	names := make([]string, 0, len(query))
	for name := range query {
		names = append(names, name)
	}
	sort.Strings(names)
	var vals []string
	for _, name := range names {
		vals = append(vals, query[name]...)
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(orgID + path + strings.Join(vals, "&") + strconv.FormatInt(timestampMillis, 10)))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
