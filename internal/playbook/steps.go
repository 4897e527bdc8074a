package playbook

import (
	"fmt"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/yamlnode"

	"github.com/runbook/runbook/internal/suggest"
)

var stepKeys = []string{
	"id", "name", "uses", "with", "if", "needs", "for_each", "max_parallel",
	"retry", "timeout", "continue_on_error", "outputs", "runs_on", "on_agent_lost",
}

var retryKeys = []string{"attempts", "delay", "backoff", "max_delay", "jitter", "if"}

// stepNode is a step being loaded: the model and the nodes its
// expressions are compiled from once every id is known.
type stepNode struct {
	step  *Step
	obj   *yamlnode.Object
	path  string // "steps[2]"
	list  string // "steps", "on_failure" or "finally"
	index int    // in its list
	// needNodes are the nodes of the needs entries (parallel to step.Needs).
	needNodes []*yaml.Node
	// anc holds the indexes (in its list) of the steps that finish before
	// this one: its dependencies, transitively.
	anc bitset
}

// stepSet is every step of the playbook.
type stepSet struct {
	lists map[string][]*stepNode
	all   []*stepNode
	byID  map[string]*stepNode
	ids   map[string]bool
}

var listNames = []string{"steps", "on_failure", "finally"}

// stepLists decodes steps, on_failure and finally. It returns nil when
// there are too many steps to go on.
func (l *loader) stepLists(pb *Playbook, o *yamlnode.Object) *stepSet {
	ss := &stepSet{lists: map[string][]*stepNode{}, byID: map[string]*stepNode{}, ids: map[string]bool{}}
	total := 0
	lists := map[string][]*yaml.Node{}
	for _, name := range listNames {
		n := o.Get(name)
		if n == nil {
			if name == "steps" {
				if k := o.KeyNode("steps"); k != nil {
					l.errf(k, "steps", "must list at least one step")
				} else {
					l.errf(o.Node, "", "steps is required (the list of steps to run)")
				}
			}
			continue
		}
		items, ok := l.List(n, name)
		if !ok {
			continue
		}
		if len(items) == 0 && name == "steps" {
			l.errf(n, name, "must list at least one step")
		}
		total += len(items)
		lists[name] = items
	}
	if total > MaxSteps {
		l.errf(o.Node, "", "playbook has %d steps (limit %d)", total, MaxSteps)
		return nil
	}
	for _, name := range listNames {
		for i, n := range lists[name] {
			sn := l.step(n, fmt.Sprintf("%s[%d]", name, i))
			l.stepRunsOn(pb, sn)
			sn.list, sn.index = name, i
			ss.lists[name] = append(ss.lists[name], sn)
			ss.all = append(ss.all, sn)
			switch name {
			case "steps":
				pb.Steps = append(pb.Steps, sn.step)
			case "on_failure":
				pb.OnFailure = append(pb.OnFailure, sn.step)
			default:
				pb.Finally = append(pb.Finally, sn.step)
			}
		}
	}
	return ss
}

// step decodes the structure of one step; expressions come later.
func (l *loader) step(n *yaml.Node, path string) *stepNode {
	sn := &stepNode{step: &Step{Pos: l.pos(n)}, path: path}
	o := yamlnode.Strict(l.errf, n, path, stepKeys...)
	if o == nil {
		return sn
	}
	sn.obj = o
	st := sn.step
	if v := o.Get("id"); v == nil {
		l.errf(n, path, "id is required")
	} else if s, ok := l.Str(v, yamlnode.JoinPath(path, "id")); ok {
		if !identRE().MatchString(s) {
			l.errf(v, yamlnode.JoinPath(path, "id"), "invalid step id %q: use letters, digits and _, not starting with a digit (ids appear in expressions as steps.<id>)", s)
		} else {
			st.ID = s
		}
	}
	if v := o.Get("name"); v != nil {
		st.Name, _ = l.Str(v, yamlnode.JoinPath(path, "name"))
	}
	if v := o.Get("uses"); v == nil {
		l.errf(n, path, "uses is required (the step type)")
	} else if s, ok := l.Str(v, yamlnode.JoinPath(path, "uses")); ok {
		st.Uses = s
		if d, ok := steps.Lookup(s); ok {
			st.Desc = d
		} else {
			l.errf(v, yamlnode.JoinPath(path, "uses"), "unknown step type %q%s", s, suggest.Hint(s, steps.Names()))
		}
	}
	if v := o.Get("with"); v != nil && v.Kind != yaml.MappingNode {
		l.errf(v, yamlnode.JoinPath(path, "with"), "must be a mapping (got %s)", yamlnode.KindWord(v))
	}
	if p, ok := o.Lookup("needs"); ok {
		l.needs(sn, p.Val, yamlnode.JoinPath(path, "needs"))
	}
	if v := o.Get("max_parallel"); v != nil {
		st.MaxParallel = l.atLeastOne(v, yamlnode.JoinPath(path, "max_parallel"))
		if !o.Has("for_each") {
			l.errf(o.KeyNode("max_parallel"), yamlnode.JoinPath(path, "max_parallel"), "max_parallel applies to for_each steps only")
		}
	}
	if v := o.Get("timeout"); v != nil {
		st.Timeout = l.positiveDuration(v, yamlnode.JoinPath(path, "timeout"))
	}
	if v := o.Get("continue_on_error"); v != nil {
		st.ContinueOnError, _ = l.Bool(v, yamlnode.JoinPath(path, "continue_on_error"))
	}
	if v := o.Get("retry"); v != nil {
		st.Retry = l.retry(v, yamlnode.JoinPath(path, "retry"))
	}
	if v := o.Get("outputs"); v != nil {
		if m := yamlnode.Mapping(l.errf, v, yamlnode.JoinPath(path, "outputs")); m != nil {
			for _, p := range m.Pairs {
				if !identRE().MatchString(p.Name) {
					l.errf(p.Key, yamlnode.KeyPath(yamlnode.JoinPath(path, "outputs"), p.Name), "invalid output name %q: use letters, digits and _", p.Name)
				}
			}
		}
	}
	return sn
}

// needs decodes `needs:` — a list of step ids or a single id. An empty
// list means "no dependencies" (Needs non-nil and empty).
func (l *loader) needs(sn *stepNode, n *yaml.Node, path string) {
	n = yamlnode.Deref(n)
	if yamlnode.IsNull(n) {
		return
	}
	sn.step.Needs = []string{}
	var items []*yaml.Node
	if n.Kind == yaml.ScalarNode {
		items = []*yaml.Node{n}
	} else {
		var ok bool
		if items, ok = l.List(n, path); !ok {
			return
		}
	}
	seen := map[string]bool{}
	for i, it := range items {
		ip := path
		if n.Kind == yaml.SequenceNode {
			ip = yamlnode.IndexPath(path, i)
		}
		s, ok := l.Str(it, ip)
		if !ok {
			continue
		}
		if seen[s] {
			l.errf(it, ip, "%q is listed twice", s)
			continue
		}
		seen[s] = true
		sn.step.Needs = append(sn.step.Needs, s)
		sn.needNodes = append(sn.needNodes, it)
	}
}

// retry decodes a retry policy; defaults: 3 attempts, 1s delay, backoff 1.
func (l *loader) retry(n *yaml.Node, path string) *Retry {
	r := &Retry{Attempts: 3, Delay: time.Second, Backoff: 1}
	o := yamlnode.Strict(l.errf, n, path, retryKeys...)
	if o == nil {
		return r
	}
	if v := o.Get("attempts"); v != nil {
		if a, ok := l.Int(v, yamlnode.JoinPath(path, "attempts")); ok {
			if a < 1 || a > 100 {
				l.errf(v, yamlnode.JoinPath(path, "attempts"), "must be between 1 and 100 (got %d)", a)
			} else {
				r.Attempts = a
			}
		}
	}
	if v := o.Get("delay"); v != nil {
		r.Delay, _ = l.Duration(v, yamlnode.JoinPath(path, "delay"), durationExamples)
	}
	if v := o.Get("max_delay"); v != nil {
		r.MaxDelay, _ = l.Duration(v, yamlnode.JoinPath(path, "max_delay"), durationExamples)
		if r.MaxDelay > 0 && r.MaxDelay < r.Delay {
			l.errf(v, yamlnode.JoinPath(path, "max_delay"), "must not be shorter than delay (%s)", r.Delay)
		}
	}
	if v := o.Get("backoff"); v != nil {
		if b, ok := l.Number(v, yamlnode.JoinPath(path, "backoff")); ok {
			if b < 1 || b > 100 {
				l.errf(v, yamlnode.JoinPath(path, "backoff"), "must be between 1 and 100 (got %s)", fmtNum(b))
			} else {
				r.Backoff = b
			}
		}
	}
	if v := o.Get("jitter"); v != nil {
		r.Jitter, _ = l.Bool(v, yamlnode.JoinPath(path, "jitter"))
	}
	return r
}
