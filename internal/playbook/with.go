package playbook

import (
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/yamlnode"
)

// scope builds the type environments of the playbook's expressions.
type scope struct {
	inputs map[string]string
	ss     *stepSet
	all    map[string]bool
	types  map[string]expr.StepType // memo by id
}

// stepType describes what expressions may read of step sn's outputs.
func (sc *scope) stepType(sn *stepNode) expr.StepType {
	if t, ok := sc.types[sn.step.ID]; ok {
		return t
	}
	t := expr.StepType{Outputs: map[string]bool{}}
	d := sn.step.Desc
	switch {
	case d == nil:
		t.Open = true // unknown type: already reported
	case d.OutputsFromWith:
		if w := sn.obj.Get("with"); w != nil && w.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(w.Content); i += 2 {
				t.Outputs[yamlnode.Deref(w.Content[i]).Value] = true
			}
		}
	case d.OpenOutputs:
		t.Open = true
	}
	if d != nil {
		for _, o := range d.Outputs {
			t.Outputs[o.Name] = true
		}
	}
	if sn.obj != nil {
		if o := sn.obj.Get("outputs"); o != nil && o.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(o.Content); i += 2 {
				t.Outputs[yamlnode.Deref(o.Content[i]).Value] = true
			}
		}
		t.ForEach = sn.obj.Has("for_each")
	}
	sc.types[sn.step.ID] = t
	return t
}

// visible reports whether step other finishes before sn runs.
func (sc *scope) visible(sn, other *stepNode) bool {
	if other.list == sn.list {
		return sn.anc.has(other.index)
	}
	return other.list == "steps" && sn.list != "steps"
}

// env returns the type environment of the expressions of step sn. Only
// the ids its expressions mention are put in Steps (the others cannot be
// referenced), which keeps a 10,000-step playbook linear.
func (sc *scope) env(sn *stepNode) *expr.TypeEnv {
	te := &expr.TypeEnv{Inputs: sc.inputs, Steps: map[string]expr.StepType{}, AllSteps: sc.all}
	for _, tok := range identTokens(sn.obj.Node) {
		other, ok := sc.ss.byID[tok]
		if !ok || other == sn || other.obj == nil {
			continue
		}
		if sc.visible(sn, other) {
			te.Steps[tok] = sc.stepType(other)
		}
	}
	return te
}

// identTokens lists the identifier-like words of every string under n.
func identTokens(n *yaml.Node) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(n *yaml.Node)
	visited := map[*yaml.Node]bool{}
	walk = func(n *yaml.Node) {
		n = yamlnode.Deref(n)
		if n == nil || visited[n] {
			return
		}
		visited[n] = true
		if n.Kind == yaml.ScalarNode {
			if !strings.Contains(n.Value, "steps") {
				return
			}
			s := n.Value
			for i := 0; i < len(s); {
				if !identByte(s[i], true) {
					i++
					continue
				}
				j := i + 1
				for j < len(s) && identByte(s[j], false) {
					j++
				}
				if w := s[i:j]; !seen[w] {
					seen[w] = true
					out = append(out, w)
				}
				i = j
			}
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

func identByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// compileSteps compiles the expressions of every step and checks literal
// `with` values against the step's params.
func (l *loader) compileSteps(pb *Playbook, ss *stepSet, inputs map[string]string) {
	sc := &scope{inputs: inputs, ss: ss, all: ss.ids, types: map[string]expr.StepType{}}
	for _, sn := range ss.all {
		if l.full() {
			return
		}
		if sn.obj == nil {
			continue
		}
		l.compileStep(sc, sn)
	}
}

func (l *loader) compileStep(sc *scope, sn *stepNode) {
	st, o := sn.step, sn.obj
	base := sc.env(sn)
	if v := o.Get("for_each"); v != nil {
		st.forEachNode = v
		st.ForEach = l.forEach(v, yamlnode.JoinPath(sn.path, "for_each"), base)
	}
	te := *base
	te.Item = o.Has("for_each")
	l.compileWith(sn, &te)
	if v := o.Get("if"); v != nil {
		st.If = l.program(v, yamlnode.JoinPath(sn.path, "if"), &te)
	}
	if r := o.Get("retry"); r != nil && r.Kind == yaml.MappingNode && st.Retry != nil {
		if ro := yamlnode.Mapping(l.errf, r, ""); ro != nil {
			if v := ro.Get("if"); v != nil {
				rte := te
				rte.Error = true
				st.Retry.If = l.program(v, yamlnode.JoinPath(sn.path, "retry.if"), &rte)
			}
		}
	}
	if v := o.Get("outputs"); v != nil && v.Kind == yaml.MappingNode {
		ote := te
		ote.Result = true
		st.Outputs = l.compileMap(v, yamlnode.JoinPath(sn.path, "outputs"), &ote)
	}
}

// compileMap compiles a mapping of name -> value.
func (l *loader) compileMap(n *yaml.Node, path string, te *expr.TypeEnv) map[string]expr.Value {
	o := yamlnode.Mapping(l.errf, n, path)
	if o == nil {
		return nil
	}
	out := make(map[string]expr.Value, len(o.Pairs))
	for _, p := range o.Pairs {
		if c, ok := l.compileValue(p.Val, yamlnode.KeyPath(path, p.Name), te); ok {
			out[p.Name] = c.val
		}
	}
	return out
}

// compileWith compiles `with` and checks its literal values.
func (l *loader) compileWith(sn *stepNode, te *expr.TypeEnv) {
	st := sn.step
	path := yamlnode.JoinPath(sn.path, "with")
	check := map[string]any{}
	w := l.scriptsAsData(st, sn.obj.Get("with"), path, te)
	st.DiagPath, st.withNode = sn.path, w
	if w != nil && w.Kind == yaml.MappingNode {
		o := yamlnode.Mapping(l.errf, w, path)
		if o == nil {
			return
		}
		st.With = make(map[string]expr.Value, len(o.Pairs))
		for _, p := range o.Pairs {
			c, ok := l.compileValue(p.Val, yamlnode.KeyPath(path, p.Name), te)
			if !ok {
				check[p.Name] = steps.Dynamic{} // reported; do not pile on
				continue
			}
			st.With[p.Name] = c.val
			st.WithKeys = append(st.WithKeys, p.Name)
			check[p.Name] = c.check
		}
	} else if w != nil {
		return // not a mapping: reported by step
	}
	if st.Desc == nil {
		return
	}
	problems := st.Desc.CheckLiteral(check)
	if len(problems) == 0 && allLiteral(st.With) {
		st.Decoded = decodeWith(st.Desc, check)
	}
	for _, pr := range problems {
		p := path
		switch {
		case pr.Path == "":
		case strings.HasPrefix(pr.Path, "["):
			p += pr.Path
		default:
			p += "." + pr.Path
		}
		at := problemNode(w, pr.Path)
		if at == nil {
			at = sn.obj.Get("uses")
			if k := sn.obj.KeyNode("with"); k != nil {
				at = k
			}
		}
		l.errf(at, p, "%s", pr.Message)
	}
}

// allLiteral reports whether no value of with holds an expression.
func allLiteral(with map[string]expr.Value) bool {
	for _, v := range with {
		if !v.Literal() {
			return false
		}
	}
	return true
}

// decodeWith decodes a `with` whose values are all literal, as the engine
// decodes an evaluated one (the evaluated map is the params of a step
// whose outputs are its `with`). It is nil when the decode finds a
// problem (the load has reported it).
func decodeWith(d *steps.Descriptor, with map[string]any) *DecodedWith {
	if d.OutputsFromWith {
		return &DecodedWith{Extra: with}
	}
	params, extra, problems := d.Decode(with)
	if len(problems) > 0 {
		return nil
	}
	return &DecodedWith{Params: params, Extra: extra}
}

// problemNode finds the node a Problem path ("json.text", "items[2]",
// `labels["a.b"]`) names below `with`: the key node of the last mapping
// key found, or the list element. It stops at the deepest node that
// exists (a missing required key points at its parent's key).
func problemNode(with *yaml.Node, path string) *yaml.Node {
	cur := yamlnode.Deref(with)
	if cur == nil {
		return nil
	}
	var last *yaml.Node // key node or element of the last segment found
	for _, s := range splitPath(path) {
		switch {
		case cur.Kind == yaml.MappingNode && !s.isIndex:
			found := false
			for i := 0; i+1 < len(cur.Content); i += 2 {
				if yamlnode.Deref(cur.Content[i]).Value == s.key {
					last, cur, found = cur.Content[i], yamlnode.Deref(cur.Content[i+1]), true
					break
				}
			}
			if !found {
				return last
			}
		case cur.Kind == yaml.SequenceNode && s.isIndex && s.index < len(cur.Content):
			cur = yamlnode.Deref(cur.Content[s.index])
			last = cur
		default:
			return last
		}
	}
	return last
}

type pathSeg struct {
	key     string
	index   int
	isIndex bool
}

// splitPath splits a Problem path into keys and indexes.
func splitPath(path string) []pathSeg {
	var out []pathSeg
	for i := 0; i < len(path); {
		switch path[i] {
		case '.':
			i++
		case '[':
			rest := path[i+1:]
			if strings.HasPrefix(rest, `"`) {
				q, err := strconv.QuotedPrefix(rest)
				if err != nil {
					return out
				}
				k, _ := strconv.Unquote(q)
				out = append(out, pathSeg{key: k})
				i += 1 + len(q) + 1
				continue
			}
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return out
			}
			n, err := strconv.Atoi(rest[:end])
			if err != nil {
				return out
			}
			out = append(out, pathSeg{index: n, isIndex: true})
			i += 1 + end + 1
		default:
			j := i
			for j < len(path) && path[j] != '.' && path[j] != '[' {
				j++
			}
			out = append(out, pathSeg{key: path[i:j]})
			i = j
		}
	}
	return out
}

// ParamPos returns the position of the `with` entry a Problem path names
// ("node_count", "labels.kube_tag", "items[2]"), for checks made after
// loading (a preflight against the live API); it falls back to the step.
func (s *Step) ParamPos(path string) Pos {
	if n := problemNode(s.withNode, path); n != nil {
		return Pos{File: s.Pos.File, Line: n.Line, Col: n.Column}
	}
	return s.Pos
}

// WithNode returns the YAML of the step's with.<name> as written (nil
// when absent): `runbook plan` shows a value computed at run time as its
// source, ${{ }} parts and all.
func (s *Step) WithNode(name string) *yaml.Node {
	if s.withNode == nil || s.withNode.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(s.withNode.Content); i += 2 {
		if s.withNode.Content[i].Value == name {
			return yamlnode.Deref(s.withNode.Content[i+1])
		}
	}
	return nil
}

// ForEachNode returns the YAML of the step's for_each as written (nil
// when the step is not a loop).
func (s *Step) ForEachNode() *yaml.Node { return s.forEachNode }

// ParamDiagnostic is a diagnostic about a `with` entry of the step.
func (s *Step) ParamDiagnostic(path, message string) Diagnostic {
	p := yamlnode.JoinPath(s.DiagPath, "with")
	switch {
	case path == "":
	case strings.HasPrefix(path, "["):
		p += path
	default:
		p += "." + path
	}
	return Diagnostic{Pos: s.ParamPos(path), Path: p, Message: message}
}
