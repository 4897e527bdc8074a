package playbook

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/runbook/runbook/internal/yamlnode"
)

// On agent lost: what a step whose agent stopped heartbeating does.
const (
	AgentLostFail  = "fail"  // the attempt fails with "agent lost" (default)
	AgentLostRetry = "retry" // the attempt runs once more on another agent
)

// RunsOn places a step's attempts on a runbook agent (docs/agents.md).
type RunsOn struct {
	// Labels an agent must carry, each with this value.
	Labels map[string]string
	// OnAgentLost is AgentLostFail or AgentLostRetry.
	OnAgentLost string
}

// String is how a wait names the agents it waits for: "role=bastion,zone=a".
func (r *RunsOn) String() string {
	if r == nil {
		return ""
	}
	parts := make([]string, 0, len(r.Labels))
	for k, v := range r.Labels {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// localOnly are the step types that need the engine's own process: an
// approval waits for an answer held by the run host, a sub-playbook is a
// run of its own. A playbook's runs_on does not reach them.
var localOnly = []string{"approval", "playbook"}

// runsOn decodes `runs_on: {labels: {k: v}}` at path (a step's or the
// playbook's) and the `on_agent_lost` beside it.
func (l *loader) runsOn(o *yamlnode.Object, path string) *RunsOn {
	n := o.Get("runs_on")
	r := &RunsOn{OnAgentLost: AgentLostFail}
	if lost := o.Get("on_agent_lost"); lost != nil {
		r.OnAgentLost, _ = l.oneOf(lost, yamlnode.JoinPath(path, "on_agent_lost"), AgentLostFail, AgentLostRetry)
		if n == nil {
			return r // only the policy: the labels are the playbook's
		}
	}
	if n == nil {
		return nil
	}
	rp := yamlnode.JoinPath(path, "runs_on")
	ro := yamlnode.Strict(l.errf, n, rp, "labels")
	if ro == nil {
		return nil
	}
	r.Labels = map[string]string{}
	ln := ro.Get("labels")
	if ln == nil {
		l.errf(n, rp, "labels is required (the labels an agent must carry: runs_on: {labels: {role: bastion}})")
		return nil
	}
	m := yamlnode.Mapping(l.errf, ln, yamlnode.JoinPath(rp, "labels"))
	if m == nil {
		return nil
	}
	if len(m.Pairs) == 0 {
		l.errf(ln, yamlnode.JoinPath(rp, "labels"), "must name at least one label")
	}
	for _, p := range m.Pairs {
		lp := yamlnode.KeyPath(yamlnode.JoinPath(rp, "labels"), p.Name)
		if !labelKey(p.Name) {
			l.errf(p.Key, lp, "invalid label name %q: use 1-63 lower-case letters, digits, '.', '_', '/' or '-', starting and ending with a letter or digit", p.Name)
			continue
		}
		v, ok := l.Str(p.Val, lp)
		if !ok {
			continue
		}
		if !labelValue(v) {
			l.errf(p.Val, lp, "invalid label value %q: use 1-63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit", v)
			continue
		}
		r.Labels[p.Name] = v
	}
	return r
}

// stepRunsOn sets a step's placement: its own runs_on, else the
// playbook's default unless the step type runs only in the engine's
// process (a step's own runs_on on such a type is an error).
func (l *loader) stepRunsOn(pb *Playbook, sn *stepNode) {
	st := sn.step
	if sn.obj == nil {
		return
	}
	own := l.runsOn(sn.obj, sn.path)
	local := slices.Contains(localOnly, st.Uses)
	switch {
	case own != nil && local:
		key := sn.obj.KeyNode("runs_on")
		if key == nil {
			key = sn.obj.KeyNode("on_agent_lost")
		}
		l.errf(key, sn.path, "%s steps run in the server's process: they cannot run on an agent", st.Uses)
	case own != nil && own.Labels != nil:
		st.RunsOn = own
	case own != nil && pb.RunsOn == nil:
		l.errf(sn.obj.KeyNode("on_agent_lost"), yamlnode.JoinPath(sn.path, "on_agent_lost"), "on_agent_lost applies to steps that run on an agent (runs_on here or on the playbook)")
	case own != nil:
		st.RunsOn = &RunsOn{Labels: pb.RunsOn.Labels, OnAgentLost: own.OnAgentLost}
	case pb.RunsOn != nil && !local:
		st.RunsOn = pb.RunsOn
	}
}

// envNameRE bounds the name of an agent's environment variable.
var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// secretSources reads `secrets:`, the secrets whose values come from
// elsewhere than the server: `secrets: {token: {agent: DEPLOY_TOKEN}}`
// makes ${{ secrets.token }} the agent's DEPLOY_TOKEN (its environment or
// secrets file), resolved on the agent that runs the step and never sent.
func (l *loader) secretSources(pb *Playbook, o *yamlnode.Object) {
	n := o.Get("secrets")
	if n == nil {
		return
	}
	m := yamlnode.Mapping(l.errf, n, "secrets")
	if m == nil {
		return
	}
	pb.AgentSecrets = map[string]string{}
	for _, p := range m.Pairs {
		path := yamlnode.KeyPath("secrets", p.Name)
		if !envNameRE().MatchString(p.Name) {
			l.errf(p.Key, path, "invalid secret name %q: use letters, digits and _, not starting with a digit", p.Name)
			continue
		}
		so := yamlnode.Strict(l.errf, p.Val, path, "agent")
		if so == nil {
			continue
		}
		v := so.Get("agent")
		if v == nil {
			l.errf(p.Val, path, "agent is required (the variable of the agent's environment or secrets file: {agent: DEPLOY_TOKEN})")
			continue
		}
		env, ok := l.Str(v, yamlnode.JoinPath(path, "agent"))
		if !ok {
			continue
		}
		if !envNameRE().MatchString(env) {
			l.errf(v, yamlnode.JoinPath(path, "agent"), "invalid variable name %q", env)
			continue
		}
		pb.AgentSecrets[p.Name] = env
	}
}
