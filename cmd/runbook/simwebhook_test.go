package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/trigger"
)

// countingStarter counts the runs the intake commits and launches.
type countingStarter struct{ ids, n atomic.Int64 }

func (s *countingStarter) Prepare(_ context.Context, req trigger.StartRequest) (*state.Run, []state.Event, error) {
	id := fmt.Sprintf("r-%d", s.ids.Add(1))
	return &state.Run{ID: id, Playbook: req.Playbook.Name, Trigger: req.Trigger, Status: state.RunPending}, nil, nil
}

func (s *countingStarter) Launch(runs ...*state.Run) { s.n.Add(int64(len(runs))) }

func TestSimWebhook(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "intake.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	defer store.Close()
	pb, err := playbook.Parse("audit.yaml", []byte("version: 1\nname: audit\ntriggers:\n  - webhook: {route: sms}\nsteps:\n  - id: a\n    uses: log\n    with: {message: hi}\n"), playbook.LoadOptions{})
	require.NoError(t, err)
	st := &countingStarter{}
	in, err := trigger.NewIntake(trigger.IntakeOptions{
		Routes: map[string]trigger.Route{"sms": {Secret: "s"}}, Store: store, Starter: st,
		Playbooks: func() []*playbook.Playbook { return []*playbook.Playbook{pb} },
	})
	require.NoError(t, err)
	srv := httptest.NewServer(in)
	defer srv.Close()
	c := newCLI(t)

	t.Run("sends deliveries and duplicates and prints the report", func(t *testing.T) {
		r := c.run("sim", "webhook", "--to", srv.URL+"/hooks/sms", "--count", "25", "--duplicate-rate", "1", "--secret", "s", "--concurrency", "4")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "sent 50 requests (25 deliveries, 25 duplicates")
		assert.Contains(t, r.stdout, "status 200=50")
		assert.Contains(t, r.stdout, "answers accepted=25 duplicate=25")
		assert.Regexp(t, `latency p50 [\d.]+ms  p90 [\d.]+ms  p99 [\d.]+ms`, r.stdout)
		assert.Equal(t, int64(25), st.n.Load(), "one run per delivery")
	})
	t.Run("a wrong secret exits 1 with the 401s counted, as JSON", func(t *testing.T) {
		r := c.run("sim", "webhook", "--to", srv.URL+"/hooks/sms", "--count", "2", "--secret", "x", "--header", "X-Toast-Webhook-Signature", "--output", "json")
		assert.Equal(t, 1, r.code, r)
		var rep struct {
			ByStatus map[string]int `json:"by_status"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		assert.Equal(t, map[string]int{"401": 2}, rep.ByStatus)
		assert.Contains(t, r.stderr, "2 of 2 requests were not answered 200")
	})
	t.Run("an unknown event is a usage error", func(t *testing.T) {
		r := c.run("sim", "webhook", "--to", srv.URL, "--event", "NOPE")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "--event: want one of UNSUBSCRIBE")
	})
}
