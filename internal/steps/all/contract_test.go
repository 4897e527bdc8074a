package all_test

import (
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/all"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// quick names the step types whose example finishes at once: they call
// nothing and wait for nothing, so cancelling mid-run cannot catch them.
var quick = map[string]bool{"fail": true, "log": true, "set": true, "playbook": true, "file.line": true}

// TestEveryRegisteredStepTypePassesTheContract runs the shared contract
// suite over every step type in the registry with the example it
// registered: a type without one fails here. Every cloud step talks to one
// simulator of every service whose answers are held back 5 s, so each is
// cancelled in the middle of its first call.
func TestEveryRegisteredStepTypePassesTheContract(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Options{Speed: 3000, Start: time.Date(2026, 4, 4, 2, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.Faults.Add(sim.Fault{Latency: 5 * time.Second})
	conns := srv.Connections()

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client going away
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)

	// The examples of http.request and shell name a URL and a command that
	// exist where a user runs them; for the run these stand-ins keep the
	// step busy until it is cancelled. objectstorage.upload needs the
	// directory its example uploads.
	standIns := map[string]map[string]any{
		"http.request": {"url": slow.URL},
		"shell":        {"command": "sleep 10"},
	}
	// The ssh example names an inventory host; it stands for a server that
	// accepts connections and never says a word, so the step is cancelled
	// in the middle of its handshake.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	setUp := map[string]func(t *testing.T, c *steps.Call){
		"ssh": func(t *testing.T, c *steps.Call) {
			stepstest.HostOf(c).Connections[inventory.ConnectionName("web1")] = map[string]any{"name": "web1", "address": silent.Addr().String(),
				"user": "ops", "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", "password": "pw"}
		},
		"notify": func(t *testing.T, c *steps.Call) {
			stepstest.HostOf(c).Connections["notify:ops-chat"] = map[string]any{"kind": "slack", "url": slow.URL}
		},
		"objectstorage.upload": func(t *testing.T, c *steps.Call) {
			dir := filepath.Join(c.Dir, examplePath(t, "objectstorage.upload"))
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "weights.bin"), []byte("w"), 0o644))
		},
	}

	all := steps.All()
	require.NotEmpty(t, all)
	for _, d := range all {
		t.Run(d.Type, func(t *testing.T) {
			require.NotNil(t, d.Example, "%s registers no Example: give its Def one (valid params as a user writes them)", d.Type)
			with := d.Example
			if standIn, ok := standIns[d.Type]; ok {
				with = maps.Clone(d.Example)
				maps.Copy(with, standIn)
			}
			opts := stepstest.ContractOptions{Slow: !quick[d.Type], Prepare: func(c *steps.Call) {
				host := stepstest.HostOf(c)
				maps.Copy(host.Connections, conns)
				if name, ok := d.Example["connection"].(string); ok && host.Connections[name] == nil {
					host.Connections[name] = conns[defaultConnection(d)]
				}
				if f := setUp[d.Type]; f != nil {
					f(t, c)
				}
			}}
			stepstest.ContractWith(t, d, with, opts)
		})
	}
}

// defaultConnection is the default of d's connection param: the name of
// the service whose simulator a renamed connection stands for.
func defaultConnection(d *steps.Descriptor) string {
	props, _ := d.ParamsSchema()["properties"].(map[string]any)
	conn, _ := props["connection"].(map[string]any)
	name, _ := conn["default"].(string)
	return name
}

func examplePath(t *testing.T, typ string) string {
	d, ok := steps.Lookup(typ)
	require.True(t, ok)
	p, ok := d.Example["path"].(string)
	require.True(t, ok, "%s's example names a path", typ)
	return p
}
