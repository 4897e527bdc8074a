package webhook_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/sim/webhook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	_ "github.com/runbook/runbook/internal/steps/all" // the log step
	"github.com/runbook/runbook/internal/trigger"
)

// countStarter counts the runs started (committed and launched) per
// trigger key.
type countStarter struct {
	mu   sync.Mutex
	n    int
	keys map[string]int
}

func (s *countStarter) Prepare(_ context.Context, req trigger.StartRequest) (*state.Run, []state.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return &state.Run{ID: fmt.Sprintf("r-%d", s.n), Playbook: req.Playbook.Name, Trigger: req.Trigger, Status: state.RunPending}, nil, nil
}

func (s *countStarter) Launch(runs ...*state.Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range runs {
		s.keys[r.Trigger["key"].(string)]++
	}
}

const suppress = `version: 1
name: suppress
triggers:
  - webhook: {route: sms, each: hook}
steps:
  - id: a
    uses: log
    with: {message: hi}
`

func TestSenderAgainstTheIntake(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	defer store.Close()
	pb, err := playbook.Parse("suppress.yaml", []byte(suppress), playbook.LoadOptions{})
	require.NoError(t, err)
	st := &countStarter{keys: map[string]int{}}
	in, err := trigger.NewIntake(trigger.IntakeOptions{
		Routes: map[string]trigger.Route{"sms": {Secret: "s"}}, Store: store, Starter: st,
		Playbooks: func() []*playbook.Playbook { return []*playbook.Playbook{pb} },
	})
	require.NoError(t, err)
	srv := httptest.NewServer(in)
	defer srv.Close()

	for _, event := range webhook.Events {
		t.Run(event+" deliveries are accepted once each, duplicates answered as such", func(t *testing.T) {
			before := len(st.keys)
			rep, err := webhook.Send(context.Background(), webhook.Options{
				To: srv.URL + "/hooks/sms", Event: event, Count: 60, DuplicateRate: 0.5,
				Secret: "s", Header: "X-Toast-Webhook-Signature", Concurrency: 8, Seed: 7,
			})
			require.NoError(t, err)
			assert.Equal(t, 60, rep.Deliveries)
			assert.Greater(t, rep.Duplicates, 10)
			assert.Equal(t, map[string]int{"200": rep.Requests}, rep.ByStatus, rep.String())
			assert.Equal(t, map[string]int{"accepted": 60, "duplicate": rep.Duplicates}, rep.ByAnswer)
			st.mu.Lock()
			defer st.mu.Unlock()
			assert.Len(t, st.keys, before+rep.Hooks, "one run per hook")
			for k, n := range st.keys {
				require.Equal(t, 1, n, k)
			}
			assert.Positive(t, rep.P99)
		})
	}
	t.Run("a wrong secret is counted as 401", func(t *testing.T) {
		rep, err := webhook.Send(context.Background(), webhook.Options{To: srv.URL + "/hooks/sms", Count: 3, Secret: "nope"})
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"401": 3}, rep.ByStatus)
		assert.Contains(t, rep.String(), "status 401=3")
	})
}

func TestDeliveriesAreValidAndRepeatable(t *testing.T) {
	now := time.Date(2026, 3, 7, 0, 30, 0, 0, time.UTC)
	for _, event := range webhook.Events {
		a, n := webhook.Delivery(rand.New(rand.NewPCG(1, 2)), event, 2, 5, now)
		b, _ := webhook.Delivery(rand.New(rand.NewPCG(1, 2)), event, 2, 5, now)
		assert.Equal(t, a, b, "same seed, same delivery")
		d, err := trigger.ParseDelivery(a)
		require.NoError(t, err, "%s: %s", event, a)
		assert.Len(t, d.Hooks, n)
		if event == "UNSUBSCRIBE" {
			assert.Regexp(t, `^010\d{8}$`, d.Hooks[0]["recipientNo"])
			assert.Regexp(t, `^2026-03-07T09:\d\d:\d\d\.\d{3}\+09:00$`, d.Hooks[0]["createdDateTime"])
		}
	}
}

func TestSendRefusesBadOptions(t *testing.T) {
	_, err := webhook.Send(context.Background(), webhook.Options{To: "http://x", Event: "NOPE"})
	assert.ErrorContains(t, err, `unknown event "NOPE"`)
	_, err = webhook.Send(context.Background(), webhook.Options{To: "http://x", DuplicateRate: 2})
	assert.ErrorContains(t, err, "between 0 and 1")
	_, err = webhook.Send(context.Background(), webhook.Options{To: "http://x", Rate: -1})
	assert.ErrorContains(t, err, "negative")
}

// A rate spaces the deliveries: 20 at 200 a second take at least 95 ms,
// however many senders wait, and each is answered.
func TestARateSpacesTheDeliveries(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}))
	defer srv.Close()
	rep, err := webhook.Send(context.Background(), webhook.Options{To: srv.URL, Count: 20, Concurrency: 8, Rate: 200, MaxHooks: 1})
	require.NoError(t, err)
	assert.Equal(t, 20, rep.ByStatus["200"])
	require.Len(t, times, 20)
	assert.GreaterOrEqual(t, rep.Elapsed, 95*time.Millisecond, "the last is handed out 19/200 s after the first")
}

// 32 senders deliver 640 times: each keeps its connection, as a sender
// under load does, instead of dialing again for every delivery.
func TestEachSenderKeepsItsConnection(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	rep, err := webhook.Send(context.Background(), webhook.Options{To: srv.URL, Count: 640, Concurrency: 32, MaxHooks: 1})
	require.NoError(t, err)
	assert.Equal(t, 640, rep.ByStatus["200"])
	// A connection goes back to the pool a moment after its answer is
	// read, so a sender quick enough dials once more now and then.
	assert.LessOrEqual(t, conns.Load(), int64(2*32), "about a connection a sender")
}
