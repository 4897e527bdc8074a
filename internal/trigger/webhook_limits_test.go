package trigger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sizedDelivery is a valid delivery (of an event the intake does not
// check) of exactly n bytes.
func sizedDelivery(t *testing.T, hooksID string, n int) []byte {
	t.Helper()
	pad := func(k int) []byte {
		return envelopeJSON(hooksID, "EMAIL_OPENED", []any{map[string]any{"pad": strings.Repeat("x", k)}})
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

// gateStarter is a hookStarter whose Start announces itself on entered and
// then waits for a token on gate; once quit is closed it fails instead.
type gateStarter struct {
	*hookStarter
	entered chan string
	gate    chan struct{}
	quit    chan struct{}
}

func (s gateStarter) Start(ctx context.Context, req StartRequest) (string, error) {
	s.entered <- req.Trigger["delivery"].(string)
	select {
	case <-s.gate:
	case <-s.quit:
		return "", fmt.Errorf("the test ended")
	}
	return s.hookStarter.Start(ctx, req)
}

func TestIntakeShutdownWaitsForEveryRequestInFlight(t *testing.T) {
	gs := gateStarter{entered: make(chan string, 2), gate: make(chan struct{}), quit: make(chan struct{})}
	e := newEnvWith(t, 0, func(st *hookStarter) Starter { gs.hookStarter = st; return gs }, perDeliveryPlaybook)
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
