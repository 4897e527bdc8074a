package playtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/suggest"
	"github.com/runbook/runbook/internal/yamlnode"
)

// The services a test may inject HTTP faults into: the simulators and the
// sink (env.TEST_SINK).
var faultServices = []string{"easymaker", "helpcenter", "identity", "image", "logncrash", "network", "nks", "objectstorage", SinkService}

// trigger decodes `trigger:` (schedule or webhook).
func (l *loader) trigger(n *yaml.Node, path string) *Trigger {
	o := l.Strict(n, path, "schedule", "webhook")
	if o == nil {
		return nil
	}
	t := &Trigger{Pos: l.pos(o.Node)}
	sn, wn := o.Get("schedule"), o.Get("webhook")
	switch {
	case sn != nil && wn != nil:
		l.errf(o.Node, path, "give schedule or webhook, not both")
		return nil
	case sn != nil:
		t.Schedule = l.schedule(sn, path+".schedule")
	case wn != nil:
		t.Webhooks = l.webhooks(wn, path+".webhook")
	default:
		l.errf(o.Node, path, "give schedule (a time, or next) or webhook (a body)")
		return nil
	}
	return t
}

// schedule decodes `schedule: next`, `schedule: TIME` or
// `schedule: {trigger: N, at: TIME}`.
func (l *loader) schedule(n *yaml.Node, path string) *ScheduleFire {
	s := &ScheduleFire{}
	switch {
	case n.Kind == yaml.ScalarNode && n.Value == "next":
	case n.Kind == yaml.ScalarNode:
		s.At, _ = l.timestamp(n, path)
	default:
		o := l.Strict(n, path, "trigger", "at")
		if o == nil {
			return nil
		}
		if v := o.Get("trigger"); v != nil {
			s.Index, _ = l.IntBetween(v, path+".trigger", 0, 1000)
		}
		if v := o.Get("at"); v != nil {
			s.At, _ = l.timestamp(v, path+".at")
		}
	}
	if l.pb != nil {
		var idx []int
		for i, t := range l.pb.Triggers {
			if t.Schedule != nil {
				idx = append(idx, i)
			}
		}
		if !slices.Contains(idx, s.Index) {
			l.errf(n, path, "playbook %s has no schedule trigger at triggers[%d] (schedules: %v)", l.pb.Name, s.Index, idx)
		}
	}
	return s
}

// webhooks decodes one delivery or a list of them.
func (l *loader) webhooks(n *yaml.Node, path string) []*Delivery {
	if n.Kind != yaml.SequenceNode {
		if d := l.delivery(n, path); d != nil {
			return []*Delivery{d}
		}
		return nil
	}
	var out []*Delivery
	for i, e := range n.Content {
		if d := l.delivery(e, yamlnode.IndexPath(path, i)); d != nil {
			out = append(out, d)
		}
	}
	return out
}

func (l *loader) delivery(n *yaml.Node, path string) *Delivery {
	o := l.Strict(n, path, "route", "body", "times")
	if o == nil {
		return nil
	}
	d := &Delivery{Pos: l.pos(o.Node), Times: 1}
	var routes []string
	if l.pb != nil {
		for _, t := range l.pb.Triggers {
			if t.Webhook != nil && !slices.Contains(routes, t.Webhook.Route) {
				routes = append(routes, t.Webhook.Route)
			}
		}
	}
	if v := o.Get("route"); v != nil {
		d.Route, _ = l.Str(v, path+".route")
		if l.pb != nil && d.Route != "" && !slices.Contains(routes, d.Route) {
			l.errf(v, path+".route", "playbook %s has no webhook trigger on route %q%s", l.pb.Name, d.Route, suggest.Hint(d.Route, routes))
		}
	} else if len(routes) > 0 {
		d.Route = routes[0]
	} else if l.pb != nil {
		l.errf(o.Node, path, "playbook %s has no webhook trigger", l.pb.Name)
	}
	if v := o.Get("body"); v == nil {
		l.errf(o.Node, path, "body is required: the JSON body the sender posts")
	} else {
		d.Body = l.template(v, path+".body")
	}
	if v := o.Get("times"); v != nil {
		d.Times, _ = l.IntBetween(v, path+".times", 1, 100)
	}
	return d
}

// world decodes the simulators' starting state.
func (l *loader) world(n *yaml.Node, path string, w *World) {
	o := l.Strict(n, path, "nks", "helpcenter", "easymaker", "objectstorage")
	if o == nil {
		return
	}
	if v := o.Get("nks"); v != nil {
		w.NKS = l.nksWorld(v, path+".nks")
	}
	if v := o.Get("helpcenter"); v != nil {
		w.HelpCenter = l.helpWorld(v, path+".helpcenter")
	}
	if v := o.Get("easymaker"); v != nil {
		if eo := l.Strict(v, path+".easymaker", "experiments"); eo != nil {
			w.EasyMaker = &EasyMakerWorld{}
			for i, e := range l.list(eo.Get("experiments"), path+".easymaker.experiments") {
				if s, ok := l.Str(e, yamlnode.IndexPath(path+".easymaker.experiments", i)); ok {
					w.EasyMaker.Experiments = append(w.EasyMaker.Experiments, s)
				}
			}
		}
	}
	if v := o.Get("objectstorage"); v != nil {
		if oo := l.Strict(v, path+".objectstorage", "objects"); oo != nil {
			op := path + ".objectstorage.objects"
			for i, e := range l.list(oo.Get("objects"), op) {
				if so := l.seedObject(e, yamlnode.IndexPath(op, i)); so != nil {
					w.Objects = append(w.Objects, so)
				}
			}
		}
	}
}

func (l *loader) seedObject(n *yaml.Node, path string) *SeedObject {
	o := l.Strict(n, path, "uri", "text")
	if o == nil {
		return nil
	}
	so := &SeedObject{Pos: l.pos(o.Node)}
	if v := o.Get("uri"); v == nil {
		l.errf(o.Node, path, "uri is required (obs://host/v1/AUTH_tenant/container/object)")
	} else if s, ok := l.Str(v, path+".uri"); ok {
		if _, _, _, err := splitObjectURI(s); err != nil {
			l.errf(v, path+".uri", "%v", err)
		}
		so.URI = s
	}
	if v := o.Get("text"); v != nil {
		so.Text, _ = l.Str(v, path+".text")
	}
	return so
}

func (l *loader) nksWorld(n *yaml.Node, path string) *NKSWorld {
	o := l.Strict(n, path, "versions", "durations", "clusters")
	if o == nil {
		return nil
	}
	w := &NKSWorld{}
	if v := o.Get("versions"); v != nil {
		w.Versions = map[string]bool{}
		for _, p := range l.mapping(v, path+".versions") {
			if b, ok := l.Bool(p.Val, yamlnode.KeyPath(path+".versions", p.Name)); ok {
				w.Versions[p.Name] = b
			}
		}
	}
	if v := o.Get("durations"); v != nil {
		w.Durations = map[string]time.Duration{}
		for _, p := range l.mapping(v, path+".durations") {
			if d, ok := l.Duration(p.Val, yamlnode.KeyPath(path+".durations", p.Name), durationExamples); ok {
				w.Durations[strings.ToUpper(p.Name)] = d
			}
		}
	}
	if v := o.Get("clusters"); v != nil {
		cp := path + ".clusters"
		for i, e := range l.list(v, cp) {
			if c := l.seedCluster(e, yamlnode.IndexPath(cp, i)); c != nil {
				w.Clusters = append(w.Clusters, c)
			}
		}
	}
	return w
}

func (l *loader) seedCluster(n *yaml.Node, path string) *SeedCluster {
	o := l.Strict(n, path, "name", "version", "node_count", "node_groups")
	if o == nil {
		return nil
	}
	c := &SeedCluster{Pos: l.pos(o.Node)}
	if v := o.Get("name"); v == nil {
		l.errf(o.Node, path, "name is required")
	} else {
		c.Name, _ = l.Str(v, path+".name")
	}
	if v := o.Get("version"); v != nil {
		c.Version, _ = l.text(v, path+".version")
	}
	if v := o.Get("node_count"); v != nil {
		c.NodeCount, _ = l.IntBetween(v, path+".node_count", 1, 100)
	}
	if v := o.Get("node_groups"); v != nil {
		gp := path + ".node_groups"
		for i, e := range l.list(v, gp) {
			ip := yamlnode.IndexPath(gp, i)
			g := l.Strict(e, ip, "name", "version", "node_count")
			if g == nil {
				continue
			}
			var ng SeedNodeGroup
			if gv := g.Get("name"); gv == nil {
				l.errf(g.Node, ip, "name is required")
			} else {
				ng.Name, _ = l.Str(gv, ip+".name")
			}
			if gv := g.Get("version"); gv != nil {
				ng.Version, _ = l.text(gv, ip+".version")
			}
			if gv := g.Get("node_count"); gv != nil {
				ng.NodeCount, _ = l.IntBetween(gv, ip+".node_count", 1, 100)
			}
			c.NodeGroups = append(c.NodeGroups, ng)
		}
	}
	return c
}

func (l *loader) helpWorld(n *yaml.Node, path string) *HelpCenterWorld {
	o := l.Strict(n, path, "generated", "notices")
	if o == nil {
		return nil
	}
	w := &HelpCenterWorld{}
	if v := o.Get("generated"); v != nil {
		w.Generated, _ = l.IntBetween(v, path+".generated", 0, 10000)
	}
	if v := o.Get("notices"); v != nil {
		np := path + ".notices"
		for i, e := range l.list(v, np) {
			if nt := l.seedNotice(e, yamlnode.IndexPath(np, i)); nt != nil {
				w.Notices = append(w.Notices, nt)
			}
		}
	}
	return w
}

func (l *loader) seedNotice(n *yaml.Node, path string) *SeedNotice {
	o := l.Strict(n, path, "title", "content", "category", "tags", "top", "age", "at")
	if o == nil {
		return nil
	}
	nt := &SeedNotice{Pos: l.pos(o.Node)}
	if v := o.Get("title"); v == nil {
		l.errf(o.Node, path, "title is required")
	} else {
		nt.Title, _ = l.Str(v, path+".title")
	}
	if v := o.Get("content"); v != nil {
		nt.Content, _ = l.Str(v, path+".content")
	}
	if v := o.Get("category"); v != nil {
		nt.Category, _ = l.IntBetween(v, path+".category", 1, 1000)
	}
	if v := o.Get("tags"); v != nil {
		for i, e := range l.list(v, path+".tags") {
			if t, ok := l.IntBetween(e, yamlnode.IndexPath(path+".tags", i), 1, 1000); ok {
				nt.Tags = append(nt.Tags, t)
			}
		}
	}
	if v := o.Get("top"); v != nil {
		nt.Top, _ = l.Bool(v, path+".top")
	}
	age, at := o.Get("age"), o.Get("at")
	switch {
	case age != nil && at != nil:
		l.errf(o.Node, path, "give age or at, not both")
	case age != nil:
		nt.Age, _ = l.Duration(age, path+".age", durationExamples)
	case at != nil:
		nt.At, _ = l.timestamp(at, path+".at")
	}
	return nt
}

// faults decodes the list of faults.
func (l *loader) faults(n *yaml.Node, path string) []Fault {
	var out []Fault
	kills := 0
	for i, e := range l.list(n, path) {
		ip := yamlnode.IndexPath(path, i)
		o := l.Strict(e, ip, "http", "task", "kill")
		if o == nil {
			continue
		}
		if len(o.Pairs) != 1 {
			l.errf(o.Node, ip, "give exactly one of http, task or kill")
			continue
		}
		f := Fault{Pos: l.pos(o.Node)}
		switch p := o.Pairs[0]; p.Name {
		case "http":
			f.HTTP = l.httpFault(p.Val, ip+".http")
		case "task":
			f.Task = l.taskFault(p.Val, ip+".task")
		case "kill":
			kills++
			if kills > 1 {
				l.errf(o.Node, ip, "a case kills its run at most once")
			}
			f.Kill = l.kill(p.Val, ip+".kill")
		}
		out = append(out, f)
	}
	return out
}

func (l *loader) httpFault(n *yaml.Node, path string) *HTTPFault {
	o := l.Strict(n, path, "service", "method", "path", "status", "count", "latency", "retry_after")
	if o == nil {
		return nil
	}
	f := &HTTPFault{}
	if v := o.Get("service"); v == nil {
		l.errf(o.Node, path, "service is required (%s)", strings.Join(faultServices, ", "))
	} else if s, ok := l.Str(v, path+".service"); ok {
		if !slices.Contains(faultServices, s) {
			l.errf(v, path+".service", "no service %q (have: %s)%s", s, strings.Join(faultServices, ", "), suggest.Hint(s, faultServices))
		}
		f.Service = s
	}
	if v := o.Get("method"); v != nil {
		f.Method = l.method(v, path+".method")
	}
	if v := o.Get("path"); v != nil {
		f.Path, _ = l.Str(v, path+".path")
		l.noGlob(v, path+".path", f.Path)
	}
	if v := o.Get("status"); v != nil {
		f.Status, _ = l.IntBetween(v, path+".status", 400, 599)
	}
	if v := o.Get("count"); v != nil {
		f.Count, _ = l.IntBetween(v, path+".count", 1, 1000)
	}
	if v := o.Get("latency"); v != nil {
		f.Latency, _ = l.Duration(v, path+".latency", durationExamples)
	}
	if v := o.Get("retry_after"); v != nil {
		f.RetryAfter, _ = l.IntBetween(v, path+".retry_after", 0, 3600)
	}
	if f.Status == 0 && f.Latency == 0 {
		l.errf(o.Node, path, "give status (an error answer) or latency (a delay), or both")
	}
	if f.RetryAfter > 0 && f.Status != http.StatusTooManyRequests && f.Status != http.StatusServiceUnavailable {
		l.errf(o.Get("retry_after"), path+".retry_after", "goes with status 429 or 503")
	}
	return f
}

// noGlob refuses a `*` in a fault's path, at its column: the path is a
// prefix (the simulators match it so), where an expectation's call path
// is a pattern; a glob there would load and never match.
func (l *loader) noGlob(n *yaml.Node, path, p string) {
	i := strings.IndexByte(p, '*')
	if i < 0 {
		return
	}
	pos := l.pos(n)
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		pos.Col++
	}
	pos.Col += i
	l.diags = append(l.diags, playbook.Diagnostic{Pos: pos, Path: path, Message: fmt.Sprintf(
		"a fault's path is a prefix, not a pattern: %q would match no call (write %q: every path that starts with it)", p, p[:i])})
}

func (l *loader) taskFault(n *yaml.Node, path string) *TaskFault {
	o := l.Strict(n, path, "operation", "cluster", "node_group", "contents", "after", "times")
	if o == nil {
		return nil
	}
	f := &TaskFault{Times: 1}
	if v := o.Get("operation"); v == nil {
		l.errf(o.Node, path, "operation is required: a task type such as NODEGROUP_UPGRADE")
	} else if s, ok := l.Str(v, path+".operation"); ok {
		f.Operation = strings.ToUpper(s)
		if !slices.Contains(taskTypes(), f.Operation) {
			l.errf(v, path+".operation", "no task type %q%s", s, suggest.Hint(f.Operation, taskTypes()))
		}
	}
	if v := o.Get("cluster"); v != nil {
		f.Cluster, _ = l.Str(v, path+".cluster")
	}
	if v := o.Get("node_group"); v != nil {
		f.NodeGroup, _ = l.Str(v, path+".node_group")
	}
	if v := o.Get("contents"); v != nil {
		f.Contents, _ = l.Str(v, path+".contents")
	}
	if v := o.Get("times"); v != nil {
		f.Times, _ = l.IntBetween(v, path+".times", 1, 100)
	}
	if v := o.Get("after"); v != nil {
		f.After, _ = l.IntBetween(v, path+".after", 0, 100)
	}
	return f
}

func (l *loader) kill(n *yaml.Node, path string) *Kill {
	o := l.Strict(n, path, "after")
	if o == nil {
		return nil
	}
	k := &Kill{}
	if v := o.Get("after"); v == nil {
		l.errf(o.Node, path, "after is required: the step after which the run is killed")
	} else if s, ok := l.Str(v, path+".after"); ok {
		l.stepRef(v, path+".after", s)
		k.After = s
	}
	return k
}

// stepRef reports a step id the playbook does not have.
func (l *loader) stepRef(n *yaml.Node, path, id string) {
	if l.pb == nil {
		return
	}
	ids := stepIDs(l.pb)
	if !slices.Contains(ids, id) {
		l.errf(n, path, "playbook %s has no step %q%s", l.pb.Name, id, suggest.Hint(id, ids))
	}
}

func (l *loader) approvals(n *yaml.Node, path string) []*Approval {
	var out []*Approval
	for i, e := range l.list(n, path) {
		ip := yamlnode.IndexPath(path, i)
		o := l.Strict(e, ip, "step", "answer", "by", "comment", "fields")
		if o == nil {
			continue
		}
		a := &Approval{Pos: l.pos(o.Node), Approve: true, By: "tester"}
		if v := o.Get("step"); v == nil {
			l.errf(o.Node, ip, "step is required: the approval step this answers")
		} else if s, ok := l.Str(v, ip+".step"); ok {
			l.stepRef(v, ip+".step", s)
			a.Step = s
		}
		if v := o.Get("answer"); v != nil {
			if s, ok := l.Str(v, ip+".answer"); ok {
				switch s {
				case "approve":
				case "reject":
					a.Approve = false
				default:
					l.errf(v, ip+".answer", "must be approve or reject (got %q)", s)
				}
			}
		}
		if v := o.Get("by"); v != nil {
			a.By, _ = l.Str(v, ip+".by")
		}
		if v := o.Get("comment"); v != nil {
			a.Comment, _ = l.Str(v, ip+".comment")
		}
		if v := o.Get("fields"); v != nil {
			if f, ok := l.Value(v, ip+".fields"); ok {
				m, isMap := f.(map[string]any)
				if !isMap {
					l.errf(v, ip+".fields", "must be a mapping (got %s)", yamlnode.KindWord(v))
				}
				a.Fields = m
			}
		}
		out = append(out, a)
	}
	return out
}

func (l *loader) retry(n *yaml.Node, path string) *RetryFrom {
	o := l.Strict(n, path, "from")
	if o == nil {
		return nil
	}
	r := &RetryFrom{Pos: l.pos(o.Node)}
	if v := o.Get("from"); v == nil {
		l.errf(o.Node, path, "from is required: the step the retry starts at")
	} else if s, ok := l.Str(v, path+".from"); ok {
		l.stepRef(v, path+".from", s)
		r.From = s
	}
	return r
}
