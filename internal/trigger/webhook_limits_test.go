package trigger

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

// sizedDelivery is a valid delivery (of an event the intake does not
// check) of exactly n bytes.
func sizedDelivery(t *testing.T, hooksID string, n int) []byte {
	t.Helper()
	pad := func(k int) []byte {
		return envelopeJSON(hooksID, "EMAIL_OPENED", []any{map[string]any{"hookId": hooksID + "-h0", "pad": strings.Repeat("x", k)}})
	}
	k := n - len(pad(0))
	require.GreaterOrEqual(t, k, 0, "a delivery is at least %d bytes", len(pad(0)))
	b := pad(k)
	require.Len(t, b, n)
	return b
}

func TestIntakeBodyLimit(t *testing.T) {
	const limit = 4096
	e := newHookEnv(t, limit, perDeliveryPlaybook)
	cases := []struct {
		name    string
		body    []byte
		chunked bool
		status  int
	}{
		{"a body of exactly the limit with Content-Length is accepted", sizedDelivery(t, "lim-1", limit), false, 200},
		{"a body of exactly the limit sent chunked is accepted", sizedDelivery(t, "lim-2", limit), true, 200},
		{"a body one byte over the limit with Content-Length is 413", sizedDelivery(t, "lim-3", limit+1), false, 413},
		{"a chunked body one byte over the limit is 413", sizedDelivery(t, "lim-4", limit+1), true, 413},
		{"a chunked body whose first bytes are a whole delivery is 413, not cut", append(sizedDelivery(t, "lim-5", limit-1), "  "...), true, 413},
		{"a chunked body far over the limit is 413", sizedDelivery(t, "lim-6", 4*limit), true, 413},
	}
	accepted := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := e.send("/hooks/sms", nil, c.body, c.chunked)
			require.NoError(t, err)
			require.Equal(t, c.status, a.status, a.raw)
			if c.status == 200 {
				accepted++
				assert.Equal(t, "accepted", a.body["status"])
				assert.Len(t, a.body["runs"], 1)
				return
			}
			assert.Equal(t, "invalid", a.body["code"])
			assert.Equal(t, fmt.Sprintf("body is larger than %d bytes", limit), a.body["error"])
		})
	}
	assert.Len(t, e.starter.started(), accepted, "only the accepted deliveries started runs")
}

// gateStarter is a prepStarter whose Prepare announces itself on entered
// and then waits for a token on gate; once quit is closed it fails
// instead.
type gateStarter struct {
	*hookStarter
	entered chan string
	gate    chan struct{}
	quit    chan struct{}
}

func (s gateStarter) Prepare(ctx context.Context, req StartRequest) (*state.Run, []state.Event, error) {
	s.entered <- req.Trigger["delivery"].(string)
	select {
	case <-s.gate:
	case <-s.quit:
		return nil, nil, fmt.Errorf("the test ended")
	}
	return prepStarter{s.hookStarter}.Prepare(ctx, req)
}

func (s gateStarter) Launch(runs ...*state.Run) { prepStarter{s.hookStarter}.Launch(runs...) }

func TestIntakeShutdownWaitsForEveryRequestInFlight(t *testing.T) {
	gs := gateStarter{entered: make(chan string, 2), gate: make(chan struct{}), quit: make(chan struct{})}
	e := newEnvWith(t, 0, func(st *hookStarter) Preparer { gs.hookStarter = st; return gs }, perDeliveryPlaybook)
	t.Cleanup(func() { close(gs.quit) }) // before the server closes
	answers := make(chan answer, 2)
	for _, id := range []string{"inf-1", "inf-2"} {
		go func() {
			a, err := e.send("/hooks/sms", nil, unsubscribe(id, "01012345678"), false)
			assert.NoError(t, err)
			answers <- a
		}()
	}
	for range 2 {
		select {
		case <-gs.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the requests never reached the Starter")
		}
	}
	shut := make(chan error, 1)
	go func() { shut <- e.intake.Shutdown(context.Background()) }()

	gs.gate <- struct{}{} // one request finishes
	first := <-answers
	require.Equal(t, 200, first.status, first.raw)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a request was still in flight", err)
	case <-time.After(200 * time.Millisecond):
	}

	gs.gate <- struct{}{} // the other one finishes
	second := <-answers
	require.Equal(t, 200, second.status, second.raw)
	select {
	case err := <-shut:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return once every request was answered")
	}
	for _, id := range []string{"inf-1", "inf-2"} {
		_, err := e.store.DedupGet(context.Background(), "webhook/sms/"+id)
		assert.NoError(t, err, "%s: its done record was written before Shutdown returned", id)
	}
	assert.Equal(t, 2, e.runCount(t))
	assert.Equal(t, 503, e.post("/hooks/sms", nil, unsubscribe("inf-3", "01012345678")).status)
}

// newClockedEnv is an intake whose store runs on clock, with opts applied
// over the options newHookEnv uses.
func newClockedEnv(t *testing.T, clock *statetest.Clock, opts func(*IntakeOptions), playbooks ...string) *hookEnv {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true, Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	var pbs []*playbook.Playbook
	for i, src := range playbooks {
		pb, err := playbook.Parse(fmt.Sprintf("pb%d.yaml", i), []byte(src), playbook.LoadOptions{})
		require.NoError(t, err)
		pbs = append(pbs, pb)
	}
	st := &hookStarter{store: store}
	o := IntakeOptions{
		Routes: map[string]Route{"sms": {Secret: testSecret}}, Store: store, Starter: prepStarter{st},
		Playbooks: func() []*playbook.Playbook { return pbs },
	}
	opts(&o)
	in, err := NewIntake(o)
	require.NoError(t, err)
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	return &hookEnv{intake: in, srv: srv, starter: st, store: store}
}

func TestIntakeRemembersADeliveryForDedupTTL(t *testing.T) {
	cases := []struct {
		name  string
		ttl   time.Duration
		after time.Duration // the redelivery comes this long after the delivery
		want  string
	}{
		{"by default a redelivery within seven days is a duplicate", 0, DefaultDedupTTL - time.Second, "duplicate"},
		{"by default a redelivery after seven days is a new delivery", 0, DefaultDedupTTL + time.Second, "accepted"},
		{"a negative TTL is the default", -time.Hour, DefaultDedupTTL + time.Second, "accepted"},
		{"a configured TTL is kept", time.Hour, time.Hour + time.Second, "accepted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := statetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			e := newClockedEnv(t, clock, func(o *IntakeOptions) { o.DedupTTL = c.ttl }, perDeliveryPlaybook)
			body := unsubscribe("ttl-1", "01012345678")
			require.Equal(t, "accepted", e.post("/hooks/sms", nil, body).body["status"])
			clock.Advance(c.after)
			a := e.post("/hooks/sms", nil, body)
			require.Equal(t, 200, a.status, a.raw)
			assert.Equal(t, c.want, a.body["status"])
			runs := 1
			if c.want == "accepted" {
				runs = 2
			}
			assert.Len(t, e.starter.started(), runs)
		})
	}
}

func TestIntakeEvaluatesNowWithItsClock(t *testing.T) {
	const stamped = `version: 1
name: stamped
inputs:
  at: {type: string}
triggers:
  - webhook: {route: sms}
    inputs: {at: "${{ formatTime(now(), '2006-01-02T15:04:05Z07:00') }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	e := newClockedEnv(t, statetest.NewClock(at), func(o *IntakeOptions) { o.Now = func() time.Time { return at } }, stamped)
	a := e.post("/hooks/sms", nil, unsubscribe("now-1", "01012345678"))
	require.Equal(t, 200, a.status, a.raw)
	started := e.starter.started()
	require.Len(t, started, 1)
	assert.Equal(t, "2031-05-06T07:08:09Z", started[0].Inputs["at"])
}

func TestParseDeliveryBounds(t *testing.T) {
	hooks := func(n int) []any {
		h := make([]any, n)
		for i := range h {
			h[i] = map[string]any{"hookId": fmt.Sprint("h-", i)}
		}
		return h
	}
	cases := []struct {
		name string
		body []byte
		err  string // "": accepted
	}{
		{"1000 hooks are accepted", envelopeJSON("b-1", "EMAIL_OPENED", hooks(maxHooks)), ""},
		{"1001 hooks are refused", envelopeJSON("b-2", "EMAIL_OPENED", hooks(maxHooks+1)), "hooks has 1001 elements; at most 1000 are accepted"},
		{"a hooksId of 256 bytes is accepted", envelopeJSON(strings.Repeat("h", 256), "EMAIL_OPENED", hooks(1)), ""},
		{"a hooksId of 257 bytes is refused", envelopeJSON(strings.Repeat("h", 257), "EMAIL_OPENED", hooks(1)), "hooksId is longer than 256 bytes"},
		{"a hookId of 256 bytes is accepted", envelopeJSON("b-3", "EMAIL_OPENED", []any{map[string]any{"hookId": strings.Repeat("h", 256)}}), ""},
		{"a hookId of 257 bytes is refused", envelopeJSON("b-4", "EMAIL_OPENED", []any{map[string]any{"hookId": strings.Repeat("h", 257)}}), "hooks[0].hookId is longer than 256 bytes"},
		{"an event of 257 bytes is refused", envelopeJSON("b-5", strings.Repeat("E", 257), hooks(1)), "event is longer than 256 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDelivery(c.body)
			if c.err != "" {
				assert.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.NotEmpty(t, d.Hooks)
		})
	}
}
