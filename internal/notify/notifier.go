package notify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/state"
)

// Event is something a rule may notify about.
type Event struct {
	Name string // one of config.Events
	// Key names the event uniquely ("run.failed/RUN"): the outbox holds
	// one message per key and channel, whoever observes the event.
	Key string
	// Rule, when set, limits the event to that rule (an overdue event is
	// made for the rule whose after it passed).
	Rule string
	Run  *state.Run // the run it is about (nil: none)
	// Playbook is the playbook's name (the run's when Run is set).
	Playbook string
	Step     string   // an approval's step
	Who      []string // who may answer an approval
	// Detail says what the event's name does not ("waited over 1h").
	Detail string
	// Route is a refusing webhook route.
	Route string
	Time  time.Time
}

// Redactor masks secrets and the values derived from them.
type Redactor interface {
	String(s string) string
	Value(v any) any
}

// Notifier turns events into the outbox's messages by the rules.
type Notifier struct {
	Rules    []config.Rule
	Store    state.NotificationStore
	Redactor Redactor
	// PublicURL is the base of the UI's run links.
	PublicURL string
	// Labels returns a playbook's labels (nil: none known).
	Labels func(playbook string) map[string]string
	// Wake is called after messages were enqueued (the sender's Wake).
	Wake func()
}

// Notify enqueues a message of ev for each channel of the rules that
// match it, once per channel whoever calls it, and returns how many it
// enqueued that were not already there.
func (n *Notifier) Notify(ctx context.Context, ev Event) (int, error) {
	ms := n.Messages(ev)
	if len(ms) == 0 {
		return 0, nil
	}
	added, err := n.Store.EnqueueNotifications(ctx, ms)
	if err != nil {
		return 0, err
	}
	if len(added) > 0 && n.Wake != nil {
		n.Wake()
	}
	return len(added), nil
}

// Messages returns ev's messages, one per channel of the matching rules,
// masked.
func (n *Notifier) Messages(ev Event) []state.Notification {
	var out []state.Notification
	seen := map[string]bool{}
	for _, r := range n.Rules {
		if !n.Matches(r, ev) {
			continue
		}
		for _, ch := range r.Channels {
			if seen[ch] {
				continue
			}
			seen[ch] = true
			out = append(out, n.message(r.Name, ch, ev))
		}
	}
	return out
}

// Matches reports whether rule r sends ev.
func (n *Notifier) Matches(r config.Rule, ev Event) bool {
	if !slices.Contains(r.On, ev.Name) || (ev.Rule != "" && ev.Rule != r.Name) {
		return false
	}
	if ev.Run != nil && ev.Run.ParentID != "" {
		return false // a sub-playbook run is told through its caller
	}
	if len(r.Playbooks) > 0 && !slices.ContainsFunc(r.Playbooks, func(p string) bool {
		return ev.Playbook != "" && state.PlaybookMatches(p, ev.Playbook)
	}) {
		return false
	}
	if len(r.Labels) > 0 {
		var labels map[string]string
		if n.Labels != nil && ev.Playbook != "" {
			labels = n.Labels(ev.Playbook)
		}
		for k, v := range r.Labels {
			if labels[k] != v {
				return false
			}
		}
	}
	if len(r.Triggers) > 0 && (ev.Run == nil || !slices.Contains(r.Triggers, TriggerKind(ev.Run))) {
		return false
	}
	return true
}

// TriggerKind is how a run was started: webhook, schedule, api or cli.
func TriggerKind(r *state.Run) string {
	if t, _ := r.Trigger["type"].(string); t != "" {
		return t
	}
	return "cli"
}

// RunLink is the UI's page of run id under base.
func RunLink(base, id string) string {
	return strings.TrimRight(base, "/") + "/runs/" + id
}

func (n *Notifier) message(rule, channel string, ev Event) state.Notification {
	subject, lines, data := render(ev)
	if ev.Run != nil && n.PublicURL != "" {
		link := RunLink(n.PublicURL, ev.Run.ID)
		lines = append(lines, "Link: "+link)
		data["link"] = link
	}
	text := subject + "\n" + strings.Join(lines, "\n")
	m := state.Notification{
		Key: ev.Key + "@" + channel, Event: ev.Name, Rule: rule, Channel: channel,
		Playbook: ev.Playbook, Subject: subject, Text: text, Data: data, CreatedAt: ev.Time,
	}
	if ev.Run != nil {
		m.RunID = ev.Run.ID
	}
	if n.Redactor != nil {
		m.Subject, m.Text = n.Redactor.String(m.Subject), n.Redactor.String(m.Text)
		if d, ok := n.Redactor.Value(m.Data).(map[string]any); ok {
			m.Data = d
		}
	}
	return m
}

// render writes ev's subject, its lines and its data.
func render(ev Event) (string, []string, map[string]any) {
	data := map[string]any{"event": ev.Name}
	var lines []string
	pb := ev.Playbook
	if pb == "" {
		pb = "a playbook"
	}
	if r := ev.Run; r != nil {
		data["run_id"], data["playbook"], data["status"], data["trigger"] = r.ID, r.Playbook, string(r.Status), TriggerKind(r)
		lines = append(lines, fmt.Sprintf("Run: %s (playbook %s, started by %s)", r.ID, r.Playbook, startedBy(r)))
		if !r.StartedAt.IsZero() {
			data["started_at"] = r.StartedAt.UTC().Format(time.RFC3339)
		}
		if !r.EndedAt.IsZero() {
			data["ended_at"] = r.EndedAt.UTC().Format(time.RFC3339)
			if !r.StartedAt.IsZero() {
				lines = append(lines, "Took: "+r.EndedAt.Sub(r.StartedAt).Round(time.Second).String())
			}
		}
		if r.Error != nil && r.Status != state.RunSucceeded {
			lines = append(lines, fmt.Sprintf("Error: %s: %s", r.Error.Code, r.Error.Message))
			data["error"] = map[string]any{"code": r.Error.Code, "message": r.Error.Message}
		}
	} else if ev.Playbook != "" {
		data["playbook"] = ev.Playbook
	}
	if ev.Step != "" {
		data["step"] = ev.Step
	}
	if len(ev.Who) > 0 {
		data["approvers"] = ev.Who
	}
	if ev.Detail != "" {
		data["detail"] = ev.Detail
		lines = append(lines, ev.Detail)
	}
	var subject string
	switch ev.Name {
	case config.EventRunFailed:
		subject = pb + " failed"
	case config.EventRunCancelled:
		subject = pb + " was cancelled"
	case config.EventRunSucceeded:
		subject = pb + " succeeded"
	case config.EventApprovalWaiting:
		subject = fmt.Sprintf("%s waits for an approval at step %s", pb, ev.Step)
		lines = append(lines, "Who may answer: "+whoMay(ev.Who))
	case config.EventApprovalOverdue:
		subject = fmt.Sprintf("the approval at step %s of %s is overdue", ev.Step, pb)
		lines = append(lines, "Who may answer: "+whoMay(ev.Who))
	case config.EventRunOverdue:
		subject = pb + " is overdue"
	case config.EventScheduleMissed:
		subject = pb + " missed schedule slots"
	case config.EventDeliveryRefused:
		subject = fmt.Sprintf("webhook route %s refuses deliveries", ev.Route)
		data["route"] = ev.Route
	default:
		subject = ev.Name
	}
	return subject, lines, data
}

func startedBy(r *state.Run) string {
	kind := TriggerKind(r)
	switch kind {
	case "webhook":
		if route, _ := r.Trigger["route"].(string); route != "" {
			return "webhook route " + route
		}
	case "schedule":
		if slot, _ := r.Trigger["slot"].(string); slot != "" {
			return "its schedule (slot " + slot + ")"
		}
	case "api":
		if by, _ := r.Trigger["by"].(string); by != "" {
			return "the API (" + by + ")"
		}
	case "cli":
		return "runbook run"
	}
	return kind
}

func whoMay(who []string) string {
	if len(who) == 0 {
		return "anyone with the approver role"
	}
	return strings.Join(who, ", ")
}
