package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/notify"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/suggest"
)

var notifyVerb = &verb{
	name:    "notify",
	summary: "test the notification rules of the config",
	run:     cmdNotify,
}

func cmdNotify(ctx context.Context, a *app, args []string) error {
	return dispatchSub(ctx, a, "notify",
		"Notifications are rules in the config (notifications:) that send run, approval, schedule and delivery events to Slack-compatible webhooks, signed webhooks and e-mail. Reference: docs/config.md#notifications.",
		[]subVerb{{"test", "send a sample event through a rule's channels and print what each answered", cmdNotifyTest}}, args)
}

func cmdNotifyTest(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "notify test",
		usage:   "[--config FILE] RULE",
		summary: "Send a sample event of RULE (its first event) through each of its channels, now, and print the result.",
		details: `The sample is sent directly, not through the outbox of runbook serve: the
channels' answers are printed (ok, or the error). It is marked as a test and
uses the config's secrets (environment, secrets file) as serve would. Exit 1
when a channel failed, 2 when the config or the rule is wrong.`,
	})
	var file, secretsFile string
	fs.StringVar(&file, "config", "", "config `file` (default ./runbook.yaml)")
	fs.StringVar(&secretsFile, "secrets", "", "secrets `file` (overrides secrets_file:)")
	pos, err := parsePositional(fs, args, 1, 1, "RULE")
	if err != nil {
		return err
	}
	cfg, err := loadConfig(file)
	if err != nil {
		return configError(a, cmpOr(file, config.DefaultFile), err)
	}
	rule, ok := cfg.Notifications.Rule(pos[0])
	if !ok {
		var names []string
		for _, r := range cfg.Notifications.Rules {
			names = append(names, r.Name)
		}
		hint := "the rules are under notifications.rules of the config"
		if len(names) > 0 {
			hint = "rules: " + strings.Join(names, ", ") + suggest.Hint(pos[0], names)
		}
		return &exitError{code: 2, err: fmt.Errorf("no notification rule %q in %s", pos[0], cmpOr(cfg.File, "the config")), hint: hint}
	}
	if secretsFile == "" {
		secretsFile = cmpOr(cfg.SecretsFile, os.Getenv("RUNBOOK_SECRETS_FILE"))
	}
	src, err := secrets.NewSource(os.Environ(), secretsFile)
	if err != nil {
		return &exitError{code: 2, err: err, hint: "check the secrets file"}
	}
	red := secrets.NewRedactor()
	lookup := func(name string) (string, bool) {
		v, ok := src.Lookup(name)
		if ok {
			red.Add(v)
		}
		return v, ok
	}
	if ds := cfg.MissingSecrets(lookup); len(ds) > 0 {
		fmt.Fprintln(a.stderr, strings.TrimRight(ds.Error(), "\n"))
		return &exitError{code: 2, err: errors.New("secrets are missing"), quiet: true, hint: "set them in the environment (RUNBOOK_SECRET_NAME or NAME) or in the secrets file"}
	}
	failed := 0
	for _, m := range sampleMessages(cfg, rule, red) {
		ch, err := notify.NewChannel(cfg.Notifications.Channels[m.Channel], lookup)
		start := time.Now()
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, cfg.Notifications.SendTimeout)
			err = ch.Send(sctx, m)
			cancel()
		}
		kind := cfg.Notifications.Channels[m.Channel].Kind
		if err != nil {
			failed++
			fmt.Fprintf(a.stdout, "FAIL  %s (%s): %s\n", m.Channel, kind, red.String(err.Error()))
			continue
		}
		fmt.Fprintf(a.stdout, "ok    %s (%s): sent %q in %s\n", m.Channel, kind, m.Subject, time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d channels failed", failed, len(rule.Channels)), quiet: true}
	}
	return nil
}

// sampleMessages are the messages of a sample of rule's first event, one
// per channel.
func sampleMessages(cfg *config.Config, rule config.Rule, red notify.Redactor) []state.Notification {
	now := time.Now()
	pb := "sample-playbook"
	if len(rule.Playbooks) > 0 && !strings.ContainsAny(rule.Playbooks[0], "*?[") {
		pb = rule.Playbooks[0]
	}
	id := "TEST-" + now.UTC().Format("20060102T150405")
	trig := map[string]any{"type": "api", "by": "runbook notify test"}
	if len(rule.Triggers) > 0 {
		trig = map[string]any{"type": rule.Triggers[0]}
	}
	run := &state.Run{ID: id, Playbook: pb, Status: state.RunFailed, Trigger: trig, StartedAt: now.Add(-95 * time.Second), EndedAt: now,
		Error: &state.ErrorRecord{Code: "failed", Message: "this is a test of notification rule " + rule.Name}}
	ev := notify.Event{Name: rule.On[0], Key: "test/" + rule.Name + "/" + id, Rule: rule.Name, Run: run, Playbook: pb, Time: now,
		Step: "approve", Who: []string{"alice"}, Route: "sample-route", Detail: "This is a test (runbook notify test " + rule.Name + ")."}
	switch ev.Name {
	case config.EventRunCancelled:
		run.Status = state.RunCancelled
	case config.EventRunSucceeded:
		run.Status, run.Error = state.RunSucceeded, nil
	case config.EventApprovalWaiting, config.EventApprovalOverdue, config.EventRunOverdue:
		run.Status, run.EndedAt, run.Error = state.RunWaiting, time.Time{}, nil
	case config.EventScheduleMissed, config.EventDeliveryRefused:
		ev.Run = nil
	}
	n := &notify.Notifier{Rules: []config.Rule{rule}, Redactor: red, PublicURL: cmpOr(cfg.Server.PublicURL, "http://"+cfg.Server.Listen),
		Labels: func(string) map[string]string { return rule.Labels }}
	ms := n.Messages(ev)
	if len(ms) == 0 { // the rule's own filters refused the sample (labels of no playbook): send it anyway
		ev.Run, ev.Playbook = nil, ""
		n.Rules[0].Triggers, n.Rules[0].Playbooks = nil, nil
		ms = n.Messages(ev)
	}
	for i := range ms {
		ms[i].Subject = "[test] " + ms[i].Subject
		ms[i].Text = "[test] " + ms[i].Text
	}
	return slices.Clip(ms)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
