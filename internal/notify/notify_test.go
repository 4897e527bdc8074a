package notify_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/notify"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

const (
	// theSecret is a secret a run's error leaks; it must reach no message.
	theSecret    = "s3cr3t-t0ken-8c1f0e77d2"
	smtpUser     = "runbook"
	smtpPassword = "mail-pass-91b2"
)

var signingKey = []byte("0123456789abcdef0123456789abcdef")

// rig is a notifier and a sender over a real bbolt file, with a
// Slack-style receiver, a signed-webhook receiver and, when asked, a real
// SMTP server.
type rig struct {
	store  *bolt.Store
	slack  *receiver
	hook   *receiver
	smtp   *smtpServer
	cfg    *config.Config
	notif  *notify.Notifier
	sender *notify.Sender
}

func newRig(t *testing.T, withMail bool, rules string) *rig {
	t.Helper()
	r := &rig{slack: newReceiver(t, nil), hook: newReceiver(t, signingKey)}
	mailChannel := ""
	if withMail {
		r.smtp = startSMTP(t, smtpUser, smtpPassword)
		mailChannel = fmt.Sprintf(`    mail:
      kind: email
      smtp: %s
      from: runbook@example.com
      to: [ops@example.com]
      username: %s
      password_secret: SMTP_PASSWORD
      ca_file: %s
`, r.smtp.Addr, smtpUser, r.smtp.CAFile)
	}
	src := fmt.Sprintf(`server: {public_url: "https://runbook.example.com"}
notifications:
  backoff: 100ms
  max_backoff: 400ms
  send_timeout: 2s
  channels:
    chat: {kind: slack, url_secret: SLACK_URL}
    pager: {kind: webhook, url: %q, secret: PAGER_WHSEC}
%s  rules:
%s`, r.hook.srv.URL, mailChannel, rules)
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "runbook.yaml"), []byte(src))
	require.NoError(t, err)
	r.cfg = cfg
	sec := map[string]string{
		"SLACK_URL":     r.slack.srv.URL + "/services/T0/B0/XYZ",
		"PAGER_WHSEC":   "whsec_" + base64.StdEncoding.EncodeToString(signingKey),
		"SMTP_PASSWORD": smtpPassword,
	}
	lookup := func(name string) (string, bool) { v, ok := sec[name]; return v, ok }
	channels := map[string]notify.Channel{}
	for name, ch := range cfg.Notifications.Channels {
		c, err := notify.NewChannel(ch, lookup)
		require.NoError(t, err)
		channels[name] = c
	}
	r.store, err = bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.store.Close() })
	red := secrets.NewRedactor()
	red.Add(theSecret)
	nt := cfg.Notifications
	r.sender = &notify.Sender{Store: r.store, Channels: channels, Claimer: "test/1",
		Backoff: nt.Backoff, MaxBackoff: nt.MaxBackoff, SendTimeout: nt.SendTimeout, Poll: 50 * time.Millisecond}
	r.notif = &notify.Notifier{Rules: nt.Rules, Store: r.store, Redactor: red, PublicURL: cfg.Server.PublicURL,
		Labels: func(pb string) map[string]string {
			if pb == "nightly-resize" {
				return map[string]string{"team": "infra"}
			}
			return nil
		},
		Wake: r.sender.Wake}
	return r
}

func failedRun(id, playbook string) *state.Run {
	start := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	return &state.Run{ID: id, Playbook: playbook, Status: state.RunFailed,
		Trigger:   map[string]any{"type": "schedule", "slot": "2026-11-29T03:00:00Z"},
		StartedAt: start, EndedAt: start.Add(95 * time.Second),
		Error: &state.ErrorRecord{Code: "invalid", Message: "resize refused: token " + theSecret + " (" + base64.StdEncoding.EncodeToString([]byte(theSecret)) + ") has no scope"}}
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAFailedRunReachesEveryChannelOnceMasked(t *testing.T) {
	r := newRig(t, true, `    - name: failures
      on: [run.failed]
      playbooks: ["nightly-*"]
      labels: {team: infra}
      triggers: [schedule]
      channels: [chat, pager, mail]
`)
	ctx := context.Background()
	run := failedRun("01JRUNFAILED", "nightly-resize")
	ev := notify.Event{Name: config.EventRunFailed, Key: "run.failed/" + run.ID, Run: run, Playbook: run.Playbook, Time: run.EndedAt}
	// Three replicas observe the run's end.
	total := 0
	for range 3 {
		n, err := r.notif.Notify(ctx, ev)
		require.NoError(t, err)
		total += n
	}
	assert.Equal(t, 3, total, "one message per channel, whoever observes the event")
	// Runs the rule does not match make none.
	for _, other := range []*state.Run{failedRun("01JOTHER", "weekly-report"), func() *state.Run {
		x := failedRun("01JBYAPI", "nightly-resize")
		x.Trigger = map[string]any{"type": "api", "by": "alice"}
		return x
	}()} {
		n, err := r.notif.Notify(ctx, notify.Event{Name: config.EventRunFailed, Key: "run.failed/" + other.ID, Run: other, Playbook: other.Playbook})
		require.NoError(t, err)
		assert.Zero(t, n, "run %s of %s by %s", other.ID, other.Playbook, notify.TriggerKind(other))
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.sender.Run(sctx)
	waitFor(t, 20*time.Second, "a message on each channel", func() bool {
		return len(r.slack.messages()) == 1 && len(r.hook.messages()) == 1 && len(r.smtp.messages()) == 1
	})

	chat := r.slack.messages()[0]
	text, _ := chat.Body["text"].(string)
	assert.Contains(t, text, "nightly-resize failed")
	assert.Contains(t, text, "Run: 01JRUNFAILED (playbook nightly-resize, started by its schedule (slot 2026-11-29T03:00:00Z))")
	assert.Contains(t, text, "Error: invalid: resize refused: token *** (***) has no scope")
	assert.Contains(t, text, "Link: https://runbook.example.com/runs/01JRUNFAILED")
	assert.NotEmpty(t, chat.Body["blocks"])

	hook := r.hook.messages()[0]
	assert.True(t, hook.Signed)
	assert.Equal(t, "run.failed/01JRUNFAILED@pager", hook.ID)
	assert.Equal(t, "run.failed", hook.Body["type"])
	data, _ := hook.Body["data"].(map[string]any)
	assert.Equal(t, "01JRUNFAILED", data["run_id"])
	assert.Equal(t, "https://runbook.example.com/runs/01JRUNFAILED", data["link"])
	assert.Equal(t, "schedule", data["trigger"])

	m := r.smtp.messages()[0]
	assert.True(t, m.TLS, "the message went over STARTTLS")
	assert.True(t, m.Auth, "the client authenticated")
	assert.Equal(t, "runbook@example.com", m.From)
	assert.Equal(t, []string{"ops@example.com"}, m.To)
	assert.Contains(t, m.Data, "Subject: nightly-resize failed")
	assert.Contains(t, m.Data, "Link: https://runbook.example.com/runs/01JRUNFAILED")

	// The secret, raw or encoded, is nowhere: not in what the receivers
	// got, not in the outbox.
	leaks := []string{theSecret, base64.StdEncoding.EncodeToString([]byte(theSecret))}
	var everything []string
	for _, x := range r.slack.messages() {
		everything = append(everything, x.Raw)
	}
	for _, x := range r.hook.messages() {
		everything = append(everything, x.Raw)
	}
	for _, x := range r.smtp.messages() {
		everything = append(everything, x.Data)
	}
	waitFor(t, 10*time.Second, "every message recorded sent", func() bool {
		sent, err := r.store.ListNotifications(ctx, state.NotificationFilter{Status: []state.NotificationStatus{state.NotifySent}})
		return err == nil && len(sent) == 3
	})
	stored, err := r.store.ListNotifications(ctx, state.NotificationFilter{})
	require.NoError(t, err)
	require.Len(t, stored, 3)
	for _, n := range stored {
		assert.Equal(t, state.NotifySent, n.Status, n.Key)
		assert.Equal(t, 1, n.Attempts, n.Key)
		everything = append(everything, n.Subject, n.Text, fmt.Sprint(n.Data))
	}
	for _, s := range everything {
		for _, leak := range leaks {
			assert.NotContains(t, s, leak)
		}
	}
}

func TestAnApprovalWaitingSaysWhoMayAnswer(t *testing.T) {
	r := newRig(t, false, `    - name: approvals
      on: [approval.waiting]
      channels: [chat]
`)
	ctx := context.Background()
	run := &state.Run{ID: "01JWAIT", Playbook: "upgrade", Status: state.RunWaiting, Trigger: map[string]any{"type": "api", "by": "bob"}}
	_, err := r.notif.Notify(ctx, notify.Event{Name: config.EventApprovalWaiting, Key: "approval.waiting/01JWAIT/confirm",
		Run: run, Playbook: run.Playbook, Step: "confirm", Who: []string{"alice", "role:approver"}})
	require.NoError(t, err)
	_, err = r.sender.SendDue(ctx)
	require.NoError(t, err)
	got := r.slack.messages()
	require.Len(t, got, 1)
	text := got[0].Body["text"].(string)
	assert.True(t, strings.HasPrefix(text, "upgrade waits for an approval at step confirm\n"), text)
	assert.Contains(t, text, "Who may answer: alice, role:approver")
	assert.Contains(t, text, "started by the API (bob)")
}

func TestAMessageToAReceiverThatIsDownArrivesWhenItReturns(t *testing.T) {
	testReceiverDown(t, 3*time.Second)
}

// testReceiverDown keeps the signed-webhook receiver down for downtime
// while a message waits, then brings it back: the message is kept as
// failing meanwhile, with its attempts and last error, and arrives once
// after.
func testReceiverDown(t *testing.T, downtime time.Duration) {
	r := newRig(t, false, `    - name: failures
      on: [run.failed]
      channels: [pager]
`)
	ctx := context.Background()
	r.hook.setDown(true)
	run := failedRun("01JDOWN", "nightly-resize")
	_, err := r.notif.Notify(ctx, notify.Event{Name: config.EventRunFailed, Key: "run.failed/" + run.ID, Run: run, Playbook: run.Playbook})
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.sender.Run(sctx)
	time.Sleep(downtime)
	n, err := r.store.GetNotification(ctx, "run.failed/01JDOWN@pager")
	require.NoError(t, err)
	assert.Equal(t, state.NotifyFailing, n.Status)
	assert.GreaterOrEqual(t, n.Attempts, 2)
	assert.Contains(t, n.LastError, "503 Service Unavailable: down for maintenance")
	list, err := r.store.ListNotifications(ctx, state.NotificationFilter{Status: []state.NotificationStatus{state.NotifyFailing}})
	require.NoError(t, err)
	assert.Len(t, list, 1, "a failing message stays listed")
	t.Logf("after %s down: %d attempts, last error %q", downtime, n.Attempts, n.LastError)

	r.hook.setDown(false)
	back := time.Now()
	waitFor(t, 10*time.Second, "the message after the receiver returned", func() bool { return len(r.hook.messages()) == 1 })
	t.Logf("arrived %s after the receiver returned", time.Since(back).Round(time.Millisecond))
	waitFor(t, 5*time.Second, "the message recorded sent", func() bool {
		n, err := r.store.GetNotification(ctx, "run.failed/01JDOWN@pager")
		return err == nil && n.Status == state.NotifySent
	})
	time.Sleep(300 * time.Millisecond)
	assert.Len(t, r.hook.messages(), 1, "sent once")
}
