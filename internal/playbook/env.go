package playbook

import (
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/yamlnode"
)

// env decodes `env:`: names to strings that may be templates over inputs
// (and secrets). Numbers and booleans are kept as written.
func (l *loader) env(pb *Playbook, o *yamlnode.Object, inputs map[string]string) {
	n := o.Get("env")
	if n == nil {
		return
	}
	m := yamlnode.Mapping(l.errf, n, "env")
	if m == nil {
		return
	}
	te := &expr.TypeEnv{Inputs: inputs, Steps: map[string]expr.StepType{}, AllSteps: map[string]bool{}}
	pb.Env = make(map[string]expr.Value, len(m.Pairs))
	for _, p := range m.Pairs {
		path := yamlnode.KeyPath("env", p.Name)
		if !identRE().MatchString(p.Name) {
			l.errf(p.Key, path, "invalid variable name %q: use letters, digits and _, not starting with a digit", p.Name)
			continue
		}
		v := yamlnode.Deref(p.Val)
		if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
			l.errf(v, path, "must be a string (got %s)", yamlnode.KindWord(v))
			continue
		}
		if v.ShortTag() != "!!str" {
			pb.Env[p.Name] = expr.Literal(v.Value)
			continue
		}
		if val, ok := l.template(v, path, te); ok {
			pb.Env[p.Name] = val
		}
	}
}

// connections decodes `connections:` (service name -> settings). Values
// stay as written; strings holding ${{ }} are compiled to report mistakes
// and to collect the secrets they use.
func (l *loader) connections(pb *Playbook, o *yamlnode.Object, inputs map[string]string) {
	n := o.Get("connections")
	if n == nil {
		return
	}
	m := yamlnode.Mapping(l.errf, n, "connections")
	if m == nil {
		return
	}
	te := &expr.TypeEnv{Inputs: inputs, Steps: map[string]expr.StepType{}, AllSteps: map[string]bool{}}
	pb.Connections = make(map[string]map[string]any, len(m.Pairs))
	for _, p := range m.Pairs {
		path := yamlnode.KeyPath("connections", p.Name)
		if yamlnode.IsNull(p.Val) {
			pb.Connections[p.Name] = map[string]any{}
			continue
		}
		v, ok := l.Value(p.Val, path)
		if !ok {
			continue
		}
		settings, isMap := v.(map[string]any)
		if !isMap {
			l.errf(p.Val, path, "must be a mapping (got %s)", yamlnode.KindWord(p.Val))
			continue
		}
		pb.Connections[p.Name] = settings
		l.checkTemplates(p.Val, path, te)
	}
}

// checkTemplates compiles every string with ${{ }} under n.
func (l *loader) checkTemplates(n *yaml.Node, path string, te *expr.TypeEnv) {
	n = yamlnode.Deref(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" && strings.Contains(n.Value, "${{") {
			l.template(n, path, te)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			l.checkTemplates(n.Content[i+1], yamlnode.KeyPath(path, yamlnode.Deref(n.Content[i]).Value), te)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			l.checkTemplates(c, yamlnode.IndexPath(path, i), te)
		}
	}
}

// playbookOutputs compiles `outputs:`, which may read every main step.
func (l *loader) playbookOutputs(pb *Playbook, o *yamlnode.Object, ss *stepSet, inputs map[string]string) {
	n := o.Get("outputs")
	if n == nil {
		return
	}
	sc := &scope{inputs: inputs, ss: ss, all: ss.ids, types: map[string]expr.StepType{}}
	te := &expr.TypeEnv{Inputs: inputs, Steps: map[string]expr.StepType{}, AllSteps: ss.ids}
	for _, sn := range ss.lists["steps"] {
		if sn.step.ID != "" && sn.obj != nil {
			te.Steps[sn.step.ID] = sc.stepType(sn)
		}
	}
	if m := yamlnode.Mapping(l.errf, n, "outputs"); m != nil {
		for _, p := range m.Pairs {
			if !identRE().MatchString(p.Name) {
				l.errf(p.Key, yamlnode.KeyPath("outputs", p.Name), "invalid output name %q: use letters, digits and _", p.Name)
			}
		}
	}
	pb.Outputs = l.compileMap(n, "outputs", te)
}
