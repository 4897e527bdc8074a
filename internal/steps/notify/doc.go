// Package notify holds the notify step: a message from a playbook to a
// notification channel of the config of runbook serve (a Slack-compatible
// webhook, a signed webhook, e-mail), sent at once through
// internal/notify/channel (which knows no config: the playbook package's
// tests import every step family). The channel's settings, secrets resolved, come through the
// step host's connection "notify:NAME", which serve fills from the config;
// the text is masked by the host (Host.Mask) before it leaves.
package notify
