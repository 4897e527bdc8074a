package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadyzTurnsFalseWhileTheServerDrains: /readyz answers 200 while the
// server takes requests, and 503 "draining" from the moment it starts
// shutting down while a webhook delivery in flight is still being
// finished (held here by its body arriving late); once the delivery is
// answered the server stops. A load balancer probing /readyz stops sending
// before the listener closes.
func TestReadyzTurnsFalseWhileTheServerDrains(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook})
	ready := func() (int, string) {
		resp, err := http.Get(e.url + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var body struct{ Status string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Status
	}
	code, status := ready()
	require.Equal(t, 200, code, status)
	assert.Equal(t, "ok", status)

	// A delivery whose handler runs (the server asked for its body: 100
	// Continue) and whose body has not all arrived.
	body := unsubscribeBody
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /hooks/sms HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Cloud-Webhook-Signature: hook-secret\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
	br := bufio.NewReader(conn)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "100 Continue", "the handler reads the body")
	_, err = br.ReadString('\n') // the blank line after 100 Continue
	require.NoError(t, err)
	_, err = conn.Write([]byte(body[:10]))
	require.NoError(t, err)

	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, status = ready()
		if code == 503 {
			break
		}
		require.Equal(t, 200, code, "readyz before the drain is seen: %s", status)
		require.True(t, time.Now().Before(deadline), "readyz still 200 20 s after the shutdown began")
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, "draining", status)
	code, _ = ready()
	assert.Equal(t, 503, code, "still draining: the delivery is in flight")
	select {
	case <-stopped:
		t.Fatal("the server stopped before the delivery in flight was answered")
	default:
	}

	_, err = conn.Write([]byte(body[10:]))
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "the delivery in flight is committed and answered: %s", answer)
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not stop once the delivery was answered")
	}
}
