package playbook

import (
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
)

// env decodes `env:`: names to strings that may be templates over inputs
// (and secrets). Numbers and booleans are kept as written.
func (l *loader) env(pb *Playbook, o *object, inputs map[string]string) {
	n := o.get("env")
	if n == nil {
		return
	}
	m := l.mapping(n, "env")
	if m == nil {
		return
	}
	te := &expr.TypeEnv{Inputs: inputs, Steps: map[string]expr.StepType{}, AllSteps: map[string]bool{}}
	pb.Env = make(map[string]expr.Value, len(m.pairs))
	for _, p := range m.pairs {
		path := keyPath("env", p.name)
		if !identRE.MatchString(p.name) {
			l.errf(p.key, path, "invalid variable name %q: use letters, digits and _, not starting with a digit", p.name)
			continue
		}
		v := deref(p.val)
		if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
			l.errf(v, path, "must be a string (got %s)", kindWord(v))
			continue
		}
		if v.ShortTag() != "!!str" {
			pb.Env[p.name] = expr.Literal(v.Value)
			continue
		}
		if val, ok := l.template(v, path, te); ok {
			pb.Env[p.name] = val
		}
	}
}

// connections decodes `connections:` (service name -> settings). Values
// stay as written; strings holding ${{ }} are compiled to report mistakes
// and to collect the secrets they use.
func (l *loader) connections(pb *Playbook, o *object, inputs map[string]string) {
	n := o.get("connections")
	if n == nil {
		return
	}
	m := l.mapping(n, "connections")
	if m == nil {
		return
	}
	te := &expr.TypeEnv{Inputs: inputs, Steps: map[string]expr.StepType{}, AllSteps: map[string]bool{}}
	pb.Connections = make(map[string]map[string]any, len(m.pairs))
	for _, p := range m.pairs {
		path := keyPath("connections", p.name)
		if isNull(p.val) {
			pb.Connections[p.name] = map[string]any{}
			continue
		}
		v, ok := l.value(p.val, path)
		if !ok {
			continue
		}
		settings, isMap := v.(map[string]any)
		if !isMap {
			l.errf(p.val, path, "must be a mapping (got %s)", kindWord(p.val))
			continue
		}
		pb.Connections[p.name] = settings
		l.checkTemplates(p.val, path, te)
	}
}

// checkTemplates compiles every string with ${{ }} under n.
func (l *loader) checkTemplates(n *yaml.Node, path string, te *expr.TypeEnv) {
	n = deref(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" && strings.Contains(n.Value, "${{") {
			l.template(n, path, te)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			l.checkTemplates(n.Content[i+1], keyPath(path, deref(n.Content[i]).Value), te)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			l.checkTemplates(c, indexPath(path, i), te)
		}
	}
}

// playbookOutputs compiles `outputs:`, which may read every main step.
func (l *loader) playbookOutputs(pb *Playbook, o *object, ss *stepSet, inputs map[string]string) {
	n := o.get("outputs")
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
	if m := l.mapping(n, "outputs"); m != nil {
		for _, p := range m.pairs {
			if !identRE.MatchString(p.name) {
				l.errf(p.key, keyPath("outputs", p.name), "invalid output name %q: use letters, digits and _", p.name)
			}
		}
	}
	pb.Outputs = l.compileMap(n, "outputs", te)
}
