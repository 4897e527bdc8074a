package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
)

func withLimits(l server.Limits) envOption {
	return func(o *server.Options) { o.Limits = l }
}

// slowBody sends a request's headers, promising a body, then one byte of
// it every 100 ms with no token and no signature, and returns how long the
// server took to close the connection (or ok false when it had not within
// limit).
func slowBody(t *testing.T, addr, path string, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: runbook\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", path)
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(limit)))
	_, err = io.Copy(io.Discard, c) // an answer, if any, then the close
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return time.Since(start), false
	}
	return time.Since(start), true
}

// TestASlowBodyIsCutOffAtTheReadTimeoutOnEveryRoute: a client that sends
// its body a byte at a time is closed once the read timeout lapses, on the
// webhook route, the UI's login and the API, before any token or
// signature is checked.
func TestASlowBodyIsCutOffAtTheReadTimeoutOnEveryRoute(t *testing.T) {
	const readTimeout = time.Second
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, withLimits(server.Limits{ReadTimeout: readTimeout}))
	addr := strings.TrimPrefix(e.url, "http://")
	for _, path := range []string{"/hooks/sms", "/login", "/api/v1/reload", "/api/v1/playbooks/gate/runs"} {
		t.Run(path, func(t *testing.T) {
			took, closed := slowBody(t, addr, path, readTimeout+5*time.Second)
			require.True(t, closed, "%s: the connection was still open after %s", path, took)
			assert.GreaterOrEqual(t, took, readTimeout-100*time.Millisecond, "closed before the body could have come")
		})
	}
}

// TestConnectionsOfOneAddressAreBoundedBeforeAuthentication: past the
// bound, the connections of an address are closed as they arrive; one that
// carried an authenticated request no longer counts.
func TestConnectionsOfOneAddressAreBoundedBeforeAuthentication(t *testing.T) {
	const bound = 5
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, withLimits(server.Limits{MaxConnsPerAddress: bound}))
	addr := strings.TrimPrefix(e.url, "http://")
	var held []net.Conn
	for range bound {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		held = append(held, c)
	}
	// Every held connection is accepted and answered in turn: the bound
	// counts them all before the next is dialled.
	for _, c := range held[1:] {
		_, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: runbook\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}

	// probe dials once more: it reports whether the server closed the
	// connection unserved; one it serves stays open (and counted), so
	// what the bound holds never depends on when a close is noticed.
	probe := func() bool {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, _ = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: runbook\r\n\r\n")
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "neither answered nor closed in 10s")
			return true
		}
		resp.Body.Close()
		return false
	}
	assert.True(t, probe(), "a connection past the bound was served")

	// An authenticated request on a held connection frees its place.
	_, err := fmt.Fprintf(held[0], "GET /api/v1/playbooks HTTP/1.1\r\nHost: runbook\r\nAuthorization: Bearer %s\r\n\r\n", token)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(held[0]), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.False(t, probe(), "the place of an authenticated connection was not freed")
	assert.True(t, probe(), "the bound is reached again")

	// So does a webhook delivery the intake accepted (its signature verified).
	body := `{"hooksId":"lim-1","webhookConfigId":"cfg","productName":"SMS","appKey":"app","event":"UNSUBSCRIBE","hooks":[{"hookId":"lim-1-h0","recipientNo":"01012345678"}]}`
	_, err = fmt.Fprintf(held[1], "POST /hooks/sms HTTP/1.1\r\nHost: runbook\r\nContent-Type: application/json\r\nX-Cloud-Webhook-Signature: hook-secret\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	require.NoError(t, err)
	resp, err = http.ReadResponse(bufio.NewReader(held[1]), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.False(t, probe(), "the place of a verified delivery was not freed")
}

const tickerPlaybook = `version: 1
name: ticker
steps:
  - id: tick
    uses: shell
    with: {command: "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 0.3; done"}
`

// TestAFollowedLogStreamOutlivesTheTimeouts: with read and write timeouts
// of half a second, following a run that prints for three seconds gets
// every line and the end.
func TestAFollowedLogStreamOutlivesTheTimeouts(t *testing.T) {
	e := newEnv(t, map[string]string{"ticker.yaml": tickerPlaybook},
		withLimits(server.Limits{ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}))
	id := e.api("POST", "/api/v1/playbooks/ticker/runs", nil).json(t)["id"].(string)
	req, _ := http.NewRequest("GET", e.url+"/api/v1/runs/"+id+"/logs?output=true&events=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream broke after %s:\n%s", time.Since(start), body)
	s := string(body)
	assert.Greater(t, time.Since(start), 2*time.Second)
	assert.Contains(t, s, "tick 10")
	assert.True(t, strings.HasSuffix(s, "event: end\ndata: {\"status\":\"succeeded\"}\n\n"), "%s", s)
}
