package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNotifications(t *testing.T) {
	src := `server:
  public_url: https://runbook.example.com/
notifications:
  backoff: 1s
  max_backoff: 1m
  channels:
    ops-chat: {kind: slack, url_secret: SLACK_HOOK}
    pager: {kind: webhook, url: "https://pager.example.com/hook", secret: PAGER_WHSEC}
    mail:
      kind: email
      smtp: smtp.example.com:587
      from: runbook@example.com
      to: [ops@example.com, "Oncall <oncall@example.com>"]
      username: runbook
      password_secret: SMTP_PASSWORD
  rules:
    - name: failures
      on: [run.failed, run.cancelled]
      playbooks: ["nightly-*", upgrade]
      labels: {team: infra}
      triggers: [schedule, webhook]
      channels: [ops-chat, mail]
    - name: slow
      on: [run.overdue]
      after: p95
      channels: [pager]
    - name: approvals
      on: [approval.waiting, approval.overdue]
      after: 1h
      channels: [ops-chat]
    - name: refusals
      on: [delivery.refused]
      burst: 3
      within: 1m
      channels: [pager]
`
	c, err := Parse("rb.yaml", []byte(src))
	require.NoError(t, err)
	n := c.Notifications
	assert.Equal(t, "https://runbook.example.com", c.Server.PublicURL)
	assert.Equal(t, time.Second, n.Backoff)
	assert.Equal(t, time.Minute, n.MaxBackoff)
	assert.Equal(t, DefaultNotifySendTimeout, n.SendTimeout)
	require.Len(t, n.Channels, 3)
	assert.Equal(t, "SLACK_HOOK", n.Channels["ops-chat"].URLSecret)
	assert.Equal(t, "PAGER_WHSEC", n.Channels["pager"].Secret)
	mail := n.Channels["mail"]
	assert.True(t, mail.StartTLS)
	assert.Equal(t, []string{"ops@example.com", "Oncall <oncall@example.com>"}, mail.To)
	require.Len(t, n.Rules, 4)
	assert.Equal(t, []string{"nightly-*", "upgrade"}, n.Rules[0].Playbooks)
	assert.Equal(t, map[string]string{"team": "infra"}, n.Rules[0].Labels)
	assert.Equal(t, 95, n.Rules[1].Percentile)
	assert.Equal(t, time.Hour, n.Rules[2].After)
	assert.Equal(t, 3, n.Rules[3].Burst)
	assert.Equal(t, time.Minute, n.Rules[3].Window)
	assert.Equal(t, []string{"PAGER_WHSEC", "RUNBOOK_API_TOKEN", "SLACK_HOOK", "SMTP_PASSWORD"}, c.SecretRefs())

	ds := c.MissingSecrets(func(name string) (string, bool) { return "x", name == "SLACK_HOOK" })
	assert.Equal(t, []string{
		`rb.yaml:15:24: notifications.channels.mail.password_secret: secret SMTP_PASSWORD is not set`,
		`rb.yaml:8:75: notifications.channels.pager.secret: secret PAGER_WHSEC is not set`,
	}, func() []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.String())
		}
		return out
	}())
}

func TestParseNotificationsInvalid(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "a rule naming an unknown channel or event is refused where it names it",
			src: `notifications:
  channels:
    ops-chat: {kind: slack, url: "http://127.0.0.1:9/x"}
  rules:
    - name: r
      on: [run.faild]
      channels: [ops-chta, pager]
`,
			want: []string{
				`rb.yaml:6:12: notifications.rules[0].on[0]: unknown "run.faild" (want one of run.failed, run.cancelled, run.succeeded, approval.waiting, approval.overdue, run.overdue, schedule.missed, delivery.refused); did you mean "run.failed"?`,
				`rb.yaml:7:18: notifications.rules[0].channels[0]: unknown channel "ops-chta"; did you mean "ops-chat"?`,
				`rb.yaml:7:28: notifications.rules[0].channels[1]: unknown channel "pager"; channels: ops-chat`,
			},
		},
		{
			name: "durations, percentiles and where they apply are checked",
			src: `notifications:
  channels:
    c: {kind: slack, url: "http://127.0.0.1:9/x"}
  rules:
    - {name: a, on: [approval.overdue], after: soon, channels: [c]}
    - {name: b, on: [approval.overdue, run.overdue], after: p95, channels: [c]}
    - {name: c, on: [run.failed], after: 1h, channels: [c]}
    - {name: d, on: [run.overdue], channels: [c]}
    - {name: e, on: [run.failed], within: 1m, channels: [c]}
`,
			want: []string{
				`rb.yaml:5:48: notifications.rules[0].after: invalid duration "soon"; use e.g. 30s, 5m, 2h, 1d`,
				`rb.yaml:6:61: notifications.rules[1].after: a percentile applies to run.overdue only: give approval.overdue a duration in a rule of its own`,
				`rb.yaml:7:42: notifications.rules[2].after: after applies to approval.overdue and run.overdue, which on: does not name`,
				`rb.yaml:8:7: notifications.rules[3]: after is required with approval.overdue or run.overdue: a duration (1h) or, for run.overdue, a percentile of the playbook's past durations (p95)`,
				`rb.yaml:9:43: notifications.rules[4].within: within applies to delivery.refused, which on: does not name`,
			},
		},
		{
			name: "channels of each kind need their settings",
			src: `notifications:
  channels:
    a: {kind: slak}
    b: {kind: webhook, url: "http://127.0.0.1:9/x"}
    c: {kind: slack, url: "ftp://x", secret: S}
    d: {kind: email, smtp: "smtp.example.com", from: me, to: []}
    e: {kind: email, smtp: "smtp.example.com:25", from: a@b.c, to: [x@y.z], username: u, password_secret: P, starttls: false}
`,
			want: []string{
				`rb.yaml:3:15: notifications.channels.a.kind: unknown channel kind "slak" (want one of slack, webhook, email); did you mean "slack"?`,
				`rb.yaml:4:8: notifications.channels.b: secret is required: the name of the whsec_ secret the messages are signed with`,
				`rb.yaml:5:27: notifications.channels.c.url: must be an http:// or https:// URL (got "ftp://x")`,
				`rb.yaml:5:38: notifications.channels.c.secret: secret does not apply to a slack channel (it takes url, url_secret)`,
				`rb.yaml:6:28: notifications.channels.d.smtp: want host:port of the SMTP server (e.g. smtp.example.com:587)`,
				`rb.yaml:6:54: notifications.channels.d.from: invalid address "me": mail: missing '@' or angle-addr`,
				`rb.yaml:6:62: notifications.channels.d.to: must name at least one address`,
				`rb.yaml:7:120: notifications.channels.e.starttls: a password is never sent in clear: keep starttls with username and password_secret`,
			},
		},
		{
			name: "a public URL is an http or https URL",
			src:  "server: {public_url: runbook.example.com}\n",
			want: []string{`rb.yaml:1:22: server.public_url: must be an http:// or https:// URL without query (got "runbook.example.com"); e.g. https://runbook.example.com`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, diags(t, tt.src))
		})
	}
}
