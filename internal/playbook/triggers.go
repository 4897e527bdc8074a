package playbook

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/yamlnode"

	"github.com/runbook/runbook/internal/suggest"
)

var (
	scheduleKeys = []string{"cron", "timezone", "overlap", "catchup", "catchup_window", "jitter"}
	webhookKeys  = []string{"route", "event", "if", "each"}
	cronParser   = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// triggers decodes `triggers:`.
func (l *loader) triggers(pb *Playbook, o *yamlnode.Object, inputs map[string]string) {
	n := o.Get("triggers")
	if n == nil {
		return
	}
	items, ok := l.List(n, "triggers")
	if !ok {
		return
	}
	for i, it := range items {
		path := yamlnode.IndexPath("triggers", i)
		t := &Trigger{Pos: l.pos(it)}
		to := yamlnode.Strict(l.errf, it, path, "schedule", "webhook", "inputs")
		if to == nil {
			continue
		}
		s, w := to.Get("schedule"), to.Get("webhook")
		switch {
		case s != nil && w != nil:
			l.errf(to.KeyNode("webhook"), path, "a trigger is either a schedule or a webhook, not both")
		case s != nil:
			t.Schedule = l.schedule(s, yamlnode.JoinPath(path, "schedule"))
		case w != nil:
			t.Webhook = l.webhook(w, yamlnode.JoinPath(path, "webhook"))
		default:
			l.errf(it, path, "a trigger needs schedule: or webhook:")
		}
		set := map[string]bool{}
		if v := to.Get("inputs"); v != nil {
			t.Inputs, set = l.triggerInputs(v, yamlnode.JoinPath(path, "inputs"), inputs)
		}
		if set != nil {
			l.requiredByTrigger(pb, it, yamlnode.JoinPath(path, "inputs"), set)
		}
		pb.Triggers = append(pb.Triggers, t)
	}
}

func (l *loader) schedule(n *yaml.Node, path string) *Schedule {
	s := &Schedule{Overlap: "skip", Catchup: "none"}
	o := yamlnode.Strict(l.errf, n, path, scheduleKeys...)
	if o == nil {
		return s
	}
	if v := o.Get("timezone"); v != nil {
		if tz, ok := l.Str(v, yamlnode.JoinPath(path, "timezone")); ok {
			s.Timezone = tz
			loc, err := time.LoadLocation(tz)
			if err != nil || tz == "" {
				l.errf(v, yamlnode.JoinPath(path, "timezone"), "unknown time zone %q; use an IANA name like Asia/Seoul or UTC", tz)
			} else {
				s.Location = loc
			}
		}
	}
	if v := o.Get("cron"); v == nil {
		l.errf(n, path, "cron is required")
	} else if c, ok := l.Str(v, yamlnode.JoinPath(path, "cron")); ok {
		s.Cron = c
		if strings.HasPrefix(c, "CRON_TZ=") || strings.HasPrefix(c, "TZ=") {
			if s.Timezone != "" {
				l.errf(v, yamlnode.JoinPath(path, "cron"), "time zone given twice: in cron (%s) and in timezone", strings.Fields(c)[0])
			}
		}
		if _, err := cronParser.Parse(c); err != nil {
			l.errf(v, yamlnode.JoinPath(path, "cron"), "invalid cron expression %q: %v; use 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or a descriptor like @daily", c, err)
		}
	}
	if s.Location == nil {
		s.Location = time.UTC
	}
	if v := o.Get("overlap"); v != nil {
		s.Overlap, _ = l.oneOf(v, yamlnode.JoinPath(path, "overlap"), "skip", "queue", "allow", "replace")
	}
	if v := o.Get("catchup"); v != nil {
		s.Catchup, _ = l.oneOf(v, yamlnode.JoinPath(path, "catchup"), "none", "latest", "all")
	}
	if v := o.Get("catchup_window"); v != nil {
		s.CatchupWindow = l.positiveDuration(v, yamlnode.JoinPath(path, "catchup_window"))
	}
	if v := o.Get("jitter"); v != nil {
		s.Jitter, _ = l.Duration(v, yamlnode.JoinPath(path, "jitter"), durationExamples)
	}
	return s
}

func (l *loader) webhook(n *yaml.Node, path string) *Webhook {
	w := &Webhook{}
	o := yamlnode.Strict(l.errf, n, path, webhookKeys...)
	if o == nil {
		return w
	}
	if v := o.Get("route"); v == nil {
		l.errf(n, path, "route is required (the path segment the webhook is served on)")
	} else if r, ok := l.Str(v, yamlnode.JoinPath(path, "route")); ok {
		if !routeOK(r) {
			l.errf(v, yamlnode.JoinPath(path, "route"), "invalid route %q: use letters, digits, '-', '_', '.' and '/'", r)
		}
		w.Route = r
	}
	if v := o.Get("event"); v != nil {
		ep := yamlnode.JoinPath(path, "event")
		if v.Kind == yaml.SequenceNode {
			items, _ := l.List(v, ep)
			for i, it := range items {
				if s, ok := l.Str(it, yamlnode.IndexPath(ep, i)); ok {
					w.Events = append(w.Events, s)
				}
			}
		} else if s, ok := l.Str(v, ep); ok {
			w.Events = []string{s}
		}
	}
	if v := o.Get("each"); v != nil {
		w.Each, _ = l.oneOf(v, yamlnode.JoinPath(path, "each"), "hook")
	}
	if v := o.Get("if"); v != nil {
		w.If = l.program(v, yamlnode.JoinPath(path, "if"), &expr.TypeEnv{Inputs: map[string]string{}, Steps: map[string]expr.StepType{}, AllSteps: map[string]bool{}})
	}
	return w
}

func routeOK(r string) bool {
	if r == "" || len(r) > 200 {
		return false
	}
	for _, c := range r {
		if c != '-' && c != '_' && c != '.' && c != '/' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// requiredByTrigger checks that a trigger sets every required input
// without a default: a triggered run has no one to pass it, so without
// this every firing would fail. set holds the input names the trigger's
// `inputs:` writes; the diagnostic points at the trigger.
func (l *loader) requiredByTrigger(pb *Playbook, trig *yaml.Node, path string, set map[string]bool) {
	for _, in := range pb.Inputs {
		if in.Required && !in.HasDefault && !set[in.Name] {
			l.errf(trig, yamlnode.KeyPath(path, in.Name),
				"required input %q has no default and this trigger does not set it; add inputs: {%s: ...} to the trigger, or give the input a default",
				in.Name, in.Name)
		}
	}
}

// triggerInputs decodes the inputs a trigger starts its run with: keys are
// declared inputs, values templates over `trigger`. set holds every
// declared input the mapping names (nil when n is not a mapping).
func (l *loader) triggerInputs(n *yaml.Node, path string, inputs map[string]string) (out map[string]expr.Value, set map[string]bool) {
	o := yamlnode.Mapping(l.errf, n, path)
	if o == nil {
		return nil, nil
	}
	te := &expr.TypeEnv{Inputs: map[string]string{}, Steps: map[string]expr.StepType{}, AllSteps: map[string]bool{}}
	out, set = map[string]expr.Value{}, map[string]bool{}
	names := sortedKeys(inputs)
	for _, p := range o.Pairs {
		kp := yamlnode.KeyPath(path, p.Name)
		set[p.Name] = true
		if _, ok := inputs[p.Name]; !ok {
			l.errf(p.Key, kp, "unknown input %q%s", p.Name, suggest.Hint(p.Name, names))
			continue
		}
		if v, ok := l.compileValue(p.Val, kp, te); ok {
			out[p.Name] = v.val
		}
	}
	return out, set
}

// concurrency decodes `concurrency: {key, on_busy}`.
func (l *loader) concurrency(pb *Playbook, o *yamlnode.Object, inputs map[string]string) {
	n := o.Get("concurrency")
	if n == nil {
		return
	}
	c := &Concurrency{OnBusy: "queue", Pos: l.pos(n)}
	co := yamlnode.Strict(l.errf, n, "concurrency", "key", "on_busy")
	if co == nil {
		return
	}
	if v := co.Get("on_busy"); v != nil {
		c.OnBusy, _ = l.oneOf(v, "concurrency.on_busy", "queue", "skip", "cancel_running")
	}
	if v := co.Get("key"); v == nil {
		l.errf(n, "concurrency", "key is required (runs with the same key do not overlap)")
	} else if _, ok := l.Str(v, "concurrency.key"); ok {
		te := &expr.TypeEnv{Inputs: inputs, Steps: map[string]expr.StepType{}, AllSteps: map[string]bool{}}
		if cv, ok := l.compileValue(v, "concurrency.key", te); ok {
			c.Key = cv.val
		}
	}
	pb.Concurrency = c
}
