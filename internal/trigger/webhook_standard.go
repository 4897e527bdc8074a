package trigger

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Route verification modes (Route.Verify).
const (
	// VerifyShared is the messaging service's scheme (the default): a
	// signature header carries the secret entered at setup, verbatim.
	VerifyShared = "shared-secret"
	// VerifyStandard is Standard Webhooks (standardwebhooks.com): the
	// headers webhook-id, webhook-timestamp and webhook-signature, an
	// HMAC-SHA256 of "{id}.{timestamp}.{body}" under a whsec_ secret.
	VerifyStandard = "standard-webhooks"
)

// VerifyModes lists the values Route.Verify accepts ("" is VerifyShared).
var VerifyModes = []string{VerifyShared, VerifyStandard}

// StandardTolerance is how far webhook-timestamp may be from the intake's
// clock, either way: an older delivery is refused as a possible replay
// (its webhook-id may have left the dedup window's reach by then).
const StandardTolerance = 5 * time.Minute

// StandardKey returns the HMAC key of a Standard Webhooks secret:
// "whsec_" (optional) followed by the key in standard base64.
func StandardKey(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(k) == 0 {
		return nil, errors.New("a Standard Webhooks secret is whsec_ followed by the key in base64")
	}
	return k, nil
}

// standardHeaders checks the headers a Standard Webhooks delivery must
// carry and its timestamp against now, before the body is read. msg is
// the 401 answer; "" when they pass.
func standardHeaders(h http.Header, now time.Time) (id, ts string, msg string) {
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		if h.Get(name) == "" {
			return "", "", name + " header is missing (Standard Webhooks)"
		}
	}
	id, ts = h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", "", fmt.Sprintf("webhook-timestamp %q is not a Unix time in seconds", ts)
	}
	skew := now.Sub(time.Unix(sec, 0))
	if skew > StandardTolerance || skew < -StandardTolerance {
		when := "old"
		if skew < 0 {
			when, skew = "in the future", -skew
		}
		return "", "", fmt.Sprintf("webhook-timestamp is %s %s; more than %s either way is refused (a replay, or a clock out of sync)",
			skew.Truncate(time.Second), when, StandardTolerance)
	}
	return id, ts, ""
}

// standardSignature reports whether one of the space-separated "v1,<base64>"
// entries of webhook-signature is the HMAC-SHA256 of "{id}.{ts}.{body}"
// under one of keys (several during a rotation). Entries of other versions
// are ignored; every comparison is constant-time.
func standardSignature(header, id, ts string, body []byte, keys [][]byte) bool {
	macs := make([][]byte, len(keys))
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		macs[i] = m.Sum(nil)
	}
	ok := false
	for _, entry := range strings.Fields(header) {
		b64, isV1 := strings.CutPrefix(entry, "v1,")
		if !isV1 {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		for _, mac := range macs {
			if hmac.Equal(sig, mac) {
				ok = true // keep comparing: the time does not tell which matched
			}
		}
	}
	return ok
}
