package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/notify"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/trigger"
)

// A server that was down for three hourly slots of a schedule with
// catchup: none tells the channel once that they were missed, naming
// them; the listing shows the message sent.
func TestMissedSlotsAfterDowntimeAreNotifiedOnce(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)

	const hourly = "version: 1\nname: hourly\ntriggers:\n  - schedule: {cron: \"0 * * * *\", catchup: none}\nsteps:\n  - id: a\n    uses: log\n    with: {message: hi}\n"
	pb, err := playbook.Parse("hourly.yaml", []byte(hourly), playbook.LoadOptions{})
	require.NoError(t, err)
	statePath := filepath.Join(t.TempDir(), "state.db")
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	last := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	require.NoError(t, store.PutCursor(context.Background(), trigger.CursorKey("hourly", 0, pb.Triggers[0].Schedule), []byte(last.Format(time.RFC3339Nano))))
	require.NoError(t, store.Close())

	cfg, err := config.Parse("rb.yaml", []byte(`notifications:
  channels:
    chat: {kind: slack, url: "`+recv.URL+`"}
  rules:
    - {name: missed, on: [schedule.missed], playbooks: [hourly], channels: [chat]}
`))
	require.NoError(t, err)
	ch, err := notify.NewChannel(cfg.Notifications.Channels["chat"], func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	e := start(t, t.TempDir(), statePath, map[string]string{"hourly.yaml": hourly}, func(o *server.Options) {
		o.Notify = server.NotifyOptions{Rules: cfg.Notifications.Rules, Channels: map[string]notify.Channel{"chat": ch}}
	})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, 15*time.Second, 20*time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	require.Len(t, got, 1, "one message for the catch-up")
	text, _ := got[0]["text"].(string)
	mu.Unlock()
	assert.Contains(t, text, "hourly missed schedule slots")
	assert.Contains(t, text, "3 slot(s) of schedule trigger 0 not fired (its catch-up policy): "+last.Add(time.Hour).Format(time.RFC3339))

	r := e.api("GET", "/api/v1/notifications?status=sent", nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	var list struct {
		Notifications []struct{ Key, Event, Status string }
	}
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Notifications, 1)
	assert.Equal(t, "schedule.missed", list.Notifications[0].Event)
	assert.Equal(t, string(state.NotifySent), list.Notifications[0].Status)
}
