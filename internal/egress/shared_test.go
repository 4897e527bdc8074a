package egress

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingServer answers 204 on loopback and counts the connections
// clients opened to it.
func countingServer(t *testing.T) (url string, conns *atomic.Int64) {
	t.Helper()
	conns = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, conns
}

func post(t *testing.T, url string) error {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: Shared()}).Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func TestTheSharedTransportReusesAConnectionBetweenCalls(t *testing.T) {
	Set(Policy{})
	t.Cleanup(func() { Set(Policy{}) })
	url, conns := countingServer(t)
	for range 5 {
		require.NoError(t, post(t, url))
	}
	assert.Equal(t, int64(1), conns.Load(), "five calls one after the other, one connection")
}

// A connection to "localhost" was dialed while loopback was allowed. A
// policy set after that denies loopback: the request names the host, not
// the address, so only a dial can refuse it, and the pooled connection
// must not be used.
func TestANewPolicyIsNotBypassedByAConnectionDialedBefore(t *testing.T) {
	Set(Policy{})
	t.Cleanup(func() { Set(Policy{}) })
	url, conns := countingServer(t)
	url = strings.Replace(url, "127.0.0.1", "localhost", 1)
	require.NoError(t, post(t, url))
	require.Equal(t, int64(1), conns.Load())

	r, err := ParseRule("127.0.0.0/8")
	require.NoError(t, err)
	Set(Policy{Deny: []Rule{r}})
	err = post(t, url)
	var refused *RefusedError
	require.True(t, errors.As(err, &refused), "got %v", err)
	assert.Equal(t, "the http.deny entry 127.0.0.0/8", refused.Why)
	assert.Equal(t, int64(1), conns.Load(), "no connection was dialed")

	Set(Policy{})
	require.NoError(t, post(t, url))
	assert.Equal(t, int64(2), conns.Load(), "the connection of the old policy was not reused")
}
