package server_test

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Each delivery is one line of serve's log, written from what the intake
// answered: its outcome and runs (the first 100 of a larger delivery,
// with their number), or why it was refused.
func TestEachDeliveryIsOneLogLine(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, map[string]string{"hook.yaml": hookPlaybook}, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	require.Equal(t, 200, e.deliver("hook-secret", hooksBody(t, "h-big", 150)))
	require.Equal(t, 401, e.deliver("forged", unsubscribeBody))

	lines := strings.Split(logs.String(), "\n")
	var accepted, refused string
	for _, l := range lines {
		switch {
		case strings.Contains(l, `msg="webhook delivery"`):
			accepted = l
		case strings.Contains(l, `msg="webhook delivery refused"`):
			refused = l
		}
	}
	require.NotEmpty(t, accepted, logs.String())
	assert.Contains(t, accepted, "outcome=accepted")
	assert.Contains(t, accepted, "runs_total=150")
	runs := regexp.MustCompile(`runs=(\S+)`).FindStringSubmatch(accepted)
	require.Len(t, runs, 2, accepted)
	assert.Len(t, strings.Split(runs[1], ","), 100)

	require.NotEmpty(t, refused, logs.String())
	assert.Contains(t, refused, "code=401")
	assert.Contains(t, refused, `err="signature does not match the route's secret"`)
}
