package playbook

import (
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/yamlnode"
)

// scriptsAsData rewrites the script params of a step (Descriptor.Scripts)
// so that no ${{ }} value is ever script text: each part becomes a quoted
// reference to a variable, and the variable, set to the expression, joins
// the step's env. It returns w unchanged or a rewritten copy (the document
// itself is never changed: its nodes may be shared through aliases). What
// cannot be kept working is reported.
func (l *loader) scriptsAsData(st *Step, w *yaml.Node, path string, te *expr.TypeEnv) *yaml.Node {
	if st.Desc == nil || w == nil || w.Kind != yaml.MappingNode {
		return w
	}
	for _, sc := range st.Desc.Scripts {
		w = l.scriptAsData(sc, w, path, te)
	}
	return w
}

func (l *loader) scriptAsData(sc steps.Script, w *yaml.Node, path string, te *expr.TypeEnv) *yaml.Node {
	ci := pairIndex(w, sc.Param)
	if ci < 0 {
		return w
	}
	val := yamlnode.Deref(w.Content[ci+1])
	if val.Kind != yaml.ScalarNode || val.ShortTag() != "!!str" || !strings.Contains(val.Value, "${{") {
		return w
	}
	parts, err := expr.SplitTemplate(val.Value)
	if err != nil {
		return w // reported when the value is compiled
	}
	if _, err := expr.CompileTemplate(val.Value, te); err != nil {
		return w // reported when the value is compiled
	}
	ppath := yamlnode.KeyPath(path, sc.Param)
	if pt, ok := wholeScript(parts); ok {
		l.errAt(l.offsetPos(val, pt.Offset), ppath,
			"${{%s}} stands for the whole command; runbook passes a value to the shell as data, never as script text: name the program and give the values as arguments (%s: [program, \"${{%s}}\"])",
			pt.Expr, sc.Instead, pt.Expr)
		return w
	}
	ei := pairIndex(w, sc.Env)
	var env *yaml.Node
	if ei >= 0 {
		env = yamlnode.Deref(w.Content[ei+1])
		if env.Kind != yaml.MappingNode {
			l.errf(val, ppath, "its ${{ }} values reach the shell through %s, which must then be written as a mapping of names to values, not computed (got %s)", sc.Env, yamlnode.KindWord(env))
			return w
		}
	}
	taken := func(name string) bool { return env != nil && pairIndex(env, name) >= 0 }
	text, vars, refused := rewriteShell(parts, taken)
	for _, r := range refused {
		src := ""
		for _, pt := range parts {
			if pt.IsExpr && pt.Offset == r.Offset {
				src = pt.Expr
			}
		}
		l.errAt(l.offsetPos(val, r.Offset), ppath, "${{%s}} %s", src, r.Why)
	}
	if len(refused) > 0 {
		return w
	}

	out := *w
	out.Content = append([]*yaml.Node(nil), w.Content...)
	cmd := *val
	cmd.Value = text
	out.Content[ci+1] = &cmd
	newEnv := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: val.Line, Column: val.Column}
	if env != nil {
		c := *env
		newEnv = &c
		newEnv.Content = append([]*yaml.Node(nil), env.Content...)
	}
	for _, v := range vars {
		newEnv.Content = append(newEnv.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.Name, Line: val.Line, Column: val.Column},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "${{ string(" + v.Expr + ") }}", Line: val.Line, Column: val.Column})
	}
	if ei >= 0 {
		out.Content[ei+1] = newEnv
	} else {
		out.Content = append(out.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: sc.Env, Line: w.Content[ci].Line, Column: w.Content[ci].Column},
			newEnv)
	}
	return &out
}

// wholeScript reports the ${{ }} part that is the whole script, blanks
// aside.
func wholeScript(parts []expr.TemplatePart) (expr.TemplatePart, bool) {
	var only expr.TemplatePart
	n := 0
	for _, pt := range parts {
		switch {
		case pt.IsExpr:
			only = pt
			n++
		case strings.TrimSpace(pt.Lit) != "":
			return only, false
		}
	}
	return only, n == 1
}

// pairIndex returns the index in mapping m of key name, or -1.
func pairIndex(m *yaml.Node, name string) int {
	if name == "" {
		return -1
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if yamlnode.Deref(m.Content[i]).Value == name {
			return i
		}
	}
	return -1
}
