package core_test

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/fault"
)

// countingListener serves 200 on a loopback address and counts the
// connections it accepts.
func countingListener(t *testing.T, addr string, h http.Handler) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	n := &atomic.Int64{}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), n
}

func setPolicy(t *testing.T, deny ...string) {
	t.Helper()
	var p egress.Policy
	for _, s := range deny {
		r, err := egress.ParseRule(s)
		require.NoError(t, err)
		p.Deny = append(p.Deny, r)
	}
	egress.Set(p)
	t.Cleanup(func() { egress.Set(egress.Policy{}) })
}

// TestHTTPRequestToADeniedAddressSendsNothing: with 127.0.0.0/8 denied, a
// request to the loopback listener (by address, in IPv4-mapped IPv6 form,
// by a name that resolves to it, or through a redirect from an allowed
// address) fails naming the rule, and the listener accepts no connection.
func TestHTTPRequestToADeniedAddressSendsNothing(t *testing.T) {
	target, hits := countingListener(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	_, port, _ := net.SplitHostPort(target)
	redirector, redirects := countingListener(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+target+"/", http.StatusFound)
	}))

	// Reachable before the policy: the test's listener answers.
	out, err := runHTTP(t, map[string]any{"url": "http://" + target + "/"})
	require.NoError(t, err)
	assert.Equal(t, 200, out["status"])
	require.Equal(t, int64(1), hits.Load())
	hits.Store(0)

	setPolicy(t, "127.0.0.1/32")
	for _, u := range []string{
		"http://" + target + "/",
		"http://[::ffff:127.0.0.1]:" + port + "/",
		"http://localhost:" + port + "/",
		"http://" + redirector + "/",
	} {
		t.Run(u, func(t *testing.T) {
			_, err := runHTTP(t, map[string]any{"url": u, "follow_redirects": true})
			require.Error(t, err)
			var fe *fault.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, fault.Invalid, fe.Code, "a refusal is not retried")
			assert.Contains(t, err.Error(), "is refused by the http.deny entry 127.0.0.1/32")
		})
	}
	assert.Equal(t, int64(0), hits.Load(), "the denied listener accepted a connection")
	assert.Equal(t, int64(1), redirects.Load(), "the allowed redirector was reached once")

	setPolicy(t, "127.0.0.0/8")
	_, err = runHTTP(t, map[string]any{"url": "http://" + redirector + "/"})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "127.0.0.0/8"), err.Error())
	assert.Equal(t, int64(1), redirects.Load(), "a denied address was reached")
}
