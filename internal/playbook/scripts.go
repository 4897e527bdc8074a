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
	val := nodeAt(w, sc.Param)
	if val == nil || val.Kind != yaml.ScalarNode || val.ShortTag() != "!!str" || !strings.Contains(val.Value, "${{") {
		return w
	}
	parts, err := expr.SplitTemplate(val.Value)
	if err != nil {
		return w // reported when the value is compiled
	}
	if _, err := expr.CompileTemplate(val.Value, te); err != nil {
		return w // reported when the value is compiled
	}
	ppath := yamlnode.JoinPath(path, sc.Param)
	if sc.NoVariables {
		for _, pt := range parts {
			if pt.IsExpr {
				l.errAt(l.offsetPos(val, pt.Offset), ppath, "${{%s}} would become template text, where a value can inject actions or markup: %s", pt.Expr, sc.Instead)
			}
		}
		return w
	}
	if pt, ok := wholeScript(parts); ok {
		l.errAt(l.offsetPos(val, pt.Offset), ppath,
			"${{%s}} stands for the whole script; runbook passes a value to the shell as data, never as script text: %s",
			pt.Expr, sc.Instead)
		return w
	}
	var env *yaml.Node
	if sc.Env != "" {
		env = nodeAt(w, sc.Env)
		if env != nil && env.Kind != yaml.MappingNode {
			l.errf(val, ppath, "its ${{ }} values reach the shell through %s, which must then be written as a mapping of names to values, not computed (got %s)", sc.Env, yamlnode.KindWord(env))
			return w
		}
	}
	taken := func(name string) bool { return env != nil && pairIndex(env, name) >= 0 }
	text, vars, refused := rewriteShell(parts, taken)
	if sc.Env == "" {
		if why := scriptShell(parts); why != "" {
			refused = append(refused, shellRefusal{firstExpr(parts), why})
		}
	}
	for _, r := range refused {
		l.errAt(l.offsetPos(val, r.Offset), ppath, "${{%s}} %s", exprAt(parts, r.Offset), r.Why)
	}
	if len(refused) > 0 {
		return w
	}
	if sc.Env == "" {
		return withNodeAt(w, sc.Param, scalarLike(val, assignAtTop(text, vars)))
	}
	newEnv := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: val.Line, Column: val.Column}
	if env != nil {
		c := *env
		newEnv = &c
		newEnv.Content = append([]*yaml.Node(nil), env.Content...)
	}
	for _, v := range vars {
		newEnv.Content = append(newEnv.Content, scalarLike(val, v.Name), scalarLike(val, "${{ string("+v.Expr+") }}"))
	}
	return withNodeAt(withNodeAt(w, sc.Param, scalarLike(val, text)), sc.Env, newEnv)
}

// assignAtTop sets each variable at the top of a script that has no
// environment of its own (it runs elsewhere), after its #! line, to its
// value quoted as one word.
func assignAtTop(text string, vars []shellVar) string {
	var b strings.Builder
	rest := text
	if strings.HasPrefix(text, "#!") {
		i := strings.IndexByte(text, '\n')
		b.WriteString(text[:i+1])
		rest = text[i+1:]
	}
	for _, v := range vars {
		b.WriteString(v.Name + "=${{ shellQuote(string(" + v.Expr + ")) }}\n")
	}
	b.WriteString(rest)
	return b.String()
}

// scriptShell explains why a script run elsewhere cannot get its values
// as variables: its #! line names no sh-like shell, or holds a ${{ }}.
func scriptShell(parts []expr.TemplatePart) string {
	if parts[0].IsExpr || !strings.HasPrefix(parts[0].Lit, "#!") {
		return ""
	}
	line, _, found := strings.Cut(parts[0].Lit, "\n")
	if !found {
		return "is on the script's #! line, where no variable is read"
	}
	f := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(f) > 1 && f[0] == "/usr/bin/env" {
		f = f[1:]
	}
	if len(f) == 0 {
		return ""
	}
	sh := f[0][strings.LastIndexByte(f[0], '/')+1:]
	switch sh {
	case "sh", "bash", "dash", "ash", "ksh", "zsh":
		return ""
	}
	return "is in a script run by " + sh + ", which runbook cannot give a value as data (it does so for sh-like shells, through a variable set at the top); write the script in sh, or let the step's params carry the value"
}

func firstExpr(parts []expr.TemplatePart) int {
	for _, pt := range parts {
		if pt.IsExpr {
			return pt.Offset
		}
	}
	return 0
}

func exprAt(parts []expr.TemplatePart, off int) string {
	for _, pt := range parts {
		if pt.IsExpr && pt.Offset == off {
			return pt.Expr
		}
	}
	return ""
}

// scalarLike is a string scalar at n's place.
func scalarLike(n *yaml.Node, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Style: n.Style & yaml.LiteralStyle, Line: n.Line, Column: n.Column}
}

// nodeAt returns the value at a dotted key path ("labels.user_script") of
// mapping m, or nil.
func nodeAt(m *yaml.Node, path string) *yaml.Node {
	for _, k := range strings.Split(path, ".") {
		if m == nil || m.Kind != yaml.MappingNode {
			return nil
		}
		i := pairIndex(m, k)
		if i < 0 {
			return nil
		}
		m = yamlnode.Deref(m.Content[i+1])
	}
	return m
}

// withNodeAt returns a copy of mapping m with the value at a dotted key
// path set to v (added when missing); m and its nodes are not changed.
func withNodeAt(m *yaml.Node, path string, v *yaml.Node) *yaml.Node {
	k, rest, nested := strings.Cut(path, ".")
	out := *m
	out.Content = append([]*yaml.Node(nil), m.Content...)
	i := pairIndex(m, k)
	if i < 0 {
		key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: v.Line, Column: v.Column}
		out.Content = append(out.Content, key, v)
		return &out
	}
	if nested {
		v = withNodeAt(yamlnode.Deref(m.Content[i+1]), rest, v)
	}
	out.Content[i+1] = v
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
