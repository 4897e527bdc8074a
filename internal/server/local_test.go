package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// The local socket serves the API's run routes with the server's own
// handlers; a run route added to the API later must be served there too
// (or refused there with a reason), so the runs verbs work the same way.
func TestLocalServesEveryRunRouteOfTheAPI(t *testing.T) {
	served := NewLocal(LocalOptions{}).localRoutes()
	uiOnly := map[string]bool{"GET /api/v1/runs/page": true, "GET /api/v1/runs/{id}/definition": true}
	for p := range routePerms {
		if !strings.Contains(p, " /api/v1/runs") || uiOnly[p] {
			continue
		}
		assert.Contains(t, served, p, "the local socket does not serve %s", p)
	}
}

func TestLocalAnswerWakesTheRunAndIsRecordedUnderTheOSUser(t *testing.T) {
	t.Setenv("USER", "alice")
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	store, err := bolt.Open(statePath, bolt.Options{NoSync: true})
	require.NoError(t, err)
	defer store.Close()
	pb, err := playbook.Parse("gated.yaml", []byte(`version: 1
name: gated
steps:
  - {id: gate, uses: approval, with: {message: go?}}
  - {id: after, uses: log, with: {message: "by ${{ steps.gate.outputs.by }}"}}
`), playbook.LoadOptions{})
	require.NoError(t, err)

	l := NewLocal(LocalOptions{Store: store, StateFile: statePath, Playbook: "gated"})
	waiting := make(chan string, 1)
	host := runner.New(runner.Options{Embedded: true, KeyPoll: time.Hour, Engine: engine.Options{
		Store: store, Environ: []string{},
		Observer: engine.Observer{Event: func(runID string, ev state.Event) {
			l.Observe(runID, ev)
			if ev.Type == "step.waiting" {
				waiting <- runID
			}
		}},
	}})
	require.NoError(t, l.Start(host))
	defer l.Close()
	require.NoError(t, host.Open(context.Background()))
	defer host.Close()
	sock := statePath + ".sock"
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	h, ok := ReadHolder(statePath)
	require.True(t, ok)
	assert.Equal(t, Holder{PID: os.Getpid(), Socket: sock, Playbook: "gated", Started: h.Started}, h)

	done := make(chan *state.Run, 1)
	go func() {
		run, err := host.Execute(context.Background(), pb, engine.StartRequest{})
		if err == nil {
			run, _ = host.Await(context.Background(), run.ID, true) // --wait: until it ends
		}
		done <- run
	}()
	var id string
	select {
	case id = <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the run does not wait for its approval")
	}

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Post("http://local/api/v1/runs/"+id+"/approve", "application/json", strings.NewReader(`{"step":"gate","approve":true}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// The poll is an hour: only the in-process answer can wake the run.
	select {
	case r := <-done:
		require.NotNil(t, r)
		assert.Equal(t, state.RunSucceeded, r.Status)
	case <-time.After(10 * time.Second):
		t.Fatal("the answer did not wake the run")
	}
	a, err := store.GetApproval(context.Background(), id, "gate")
	require.NoError(t, err)
	assert.Equal(t, "alice", a.By)
	recs, err := store.Audit(context.Background(), state.AuditFilter{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "local:alice", recs[0].Identity)
	assert.Equal(t, "run.approve", recs[0].Action)
	if runtime.GOOS == "linux" {
		assert.Equal(t, "unix socket, pid "+strconv.Itoa(os.Getpid()), recs[0].Source, "the peer is known by SO_PEERCRED")
	}

	resp, err = hc.Post("http://local/api/v1/runs/"+id+"/retry", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode, "a retry needs a server")
}

// The socket's mode is the first credential; the peer's uid, asked of the
// kernel, is the second: even through a socket opened to everyone, another
// user is refused.
func TestLocalRefusesAnotherUsersPeer(t *testing.T) {
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("needs Linux and root, to connect as another user")
	}
	// A system python: the user's own (~/.pyenv) is out of nobody's reach.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs /usr/bin/python3 to connect as another user")
	}
	dir, err := os.MkdirTemp("", "runbook-peer-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	statePath := filepath.Join(dir, "state.db")
	store, err := bolt.Open(statePath, bolt.Options{NoSync: true})
	require.NoError(t, err)
	defer store.Close()
	l := NewLocal(LocalOptions{Store: store, StateFile: statePath})
	require.NoError(t, l.Start(runner.New(runner.Options{Embedded: true, Engine: engine.Options{Store: store, Environ: []string{}}})))
	defer l.Close()
	sock := statePath + ".sock"
	require.NoError(t, os.Chmod(sock, 0o666))

	script := `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /api/v1/runs HTTP/1.0\r\n\r\n")
print(s.recv(4096).decode())`
	cmd := exec.Command(py, "-c", script, sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "403 Forbidden")
	assert.Contains(t, string(out), "uid 65534 may not use the socket")
}
