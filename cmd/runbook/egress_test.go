package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeRefusesADeniedDestinationBeforeAnyPacket: runbook serve with
// http: {deny: [127.0.0.0/8]} runs a playbook whose http.request takes its
// URL from an input; aimed at a loopback listener, the run fails naming
// the rule and the listener accepts no connection.
func TestServeRefusesADeniedDestinationBeforeAnyPacket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns atomic.Int64
	srv := &http.Server{Handler: http.NotFoundHandler(), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/fetch.yaml", `version: 1
name: fetch
inputs:
  url: {type: string}
steps:
  - id: get
    uses: http.request
    with: {url: "${{ inputs.url }}"}
`)
	c.file("runbook.yaml", "http:\n  deny: [127.0.0.0/8]\n")
	s := c.serve()
	for _, u := range []string{"http://" + ln.Addr().String() + "/", fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", ln.Addr().(*net.TCPAddr).Port)} {
		code, run := s.api(t, "POST", "/api/v1/playbooks/fetch/runs", map[string]any{"inputs": map[string]any{"url": u}})
		require.Equal(t, http.StatusCreated, code, "%v", run)
		id := run["id"].(string)
		var got map[string]any
		require.Eventually(t, func() bool {
			_, got = s.api(t, "GET", "/api/v1/runs/"+id, nil)
			return got["status"] == "failed" || got["status"] == "succeeded"
		}, 30*time.Second, 50*time.Millisecond)
		require.Equal(t, "failed", got["status"], "%v", got)
		assert.Contains(t, fmt.Sprint(got), "is refused by the http.deny entry 127.0.0.0/8")
	}
	assert.Equal(t, int64(0), conns.Load(), "the denied listener accepted a connection")
}
