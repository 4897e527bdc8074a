package expr

import (
	"fmt"
	"sort"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"

	"github.com/runbook/runbook/internal/suggest"
)

// roots are the names of the environment, in the order suggestions list them.
var roots = []string{"inputs", "steps", "env", "secrets", "trigger", "run", "item", "index", "result", "error"}

var statusFuncs = map[string]bool{"success": true, "failure": true, "always": true, "cancelled": true}

var stepFields = []string{"outputs", "status", "error"}
var errorFields = []string{"code", "message", "data", "attempt"}
var runFields = []string{"id", "playbook", "started_at", "status"}

// refChecker walks the parsed (not yet rewritten) tree: it rejects unknown
// names and references, and collects Refs.
type refChecker struct {
	te     *TypeEnv
	src    string
	base   int
	err    *CompileError
	refs   []Ref
	status bool
	lets   []string
	// result and errRef: the expression reads result or error.
	result, errRef bool
}

func (c *refChecker) fail(at ast.Node, format string, args ...any) {
	if c.err != nil {
		return
	}
	c.err = &CompileError{Offset: c.base + byteOffset(c.src, at.Location().From), Msg: fmt.Sprintf(format, args...)}
}

func (c *refChecker) isLet(name string) bool {
	for _, l := range c.lets {
		if l == name {
			return true
		}
	}
	return false
}

func (c *refChecker) visit(n ast.Node) {
	if c.err != nil || n == nil {
		return
	}
	switch n := n.(type) {
	case *ast.IdentifierNode:
		c.path(n, nil, nil)
	case *ast.MemberNode, *ast.ChainNode:
		c.chain(n)
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && !c.isLet(id.Value) {
			c.function(id, n)
		} else {
			c.visit(n.Callee)
		}
		for _, a := range n.Arguments {
			c.visit(a)
		}
	case *ast.VariableDeclaratorNode:
		c.visit(n.Value)
		if strings.HasPrefix(n.Name, "__") {
			c.fail(n, "variable names may not start with __")
			return
		}
		c.lets = append(c.lets, n.Name)
		c.visit(n.Expr)
		c.lets = c.lets[:len(c.lets)-1]
	default:
		for _, ch := range children(n) {
			c.visit(*ch)
		}
	}
}

func (c *refChecker) function(id *ast.IdentifierNode, call *ast.CallNode) {
	name := id.Value
	nargs := len(call.Arguments)
	if statusFuncs[name] {
		c.status = true
		if nargs != 0 {
			c.fail(id, "%s() takes no arguments", name)
		}
		return
	}
	if f, ok := funcSpecs[name]; ok {
		switch {
		case nargs < f.min:
			c.fail(id, "%s: not enough arguments (want %s, got %d)", name, f.arity(), nargs)
		case f.max >= 0 && nargs > f.max:
			c.fail(id, "%s: too many arguments (want %s, got %d)", name, f.arity(), nargs)
		}
		return
	}
	if _, ok := builtin.Index[name]; ok && !isReplaced(name) {
		return
	}
	c.fail(id, "unknown function %q%s", name, suggest.Hint(name, functionNames()))
}

// chain checks a member chain like steps.x.outputs.y or steps["x"].outputs.
func (c *refChecker) chain(n ast.Node) {
	var props []ast.Node
	var members []ast.Node
	cur := n
loop:
	for {
		switch m := cur.(type) {
		case *ast.ChainNode:
			cur = m.Node
		case *ast.MemberNode:
			props = append(props, m.Property)
			members = append(members, m)
			cur = m.Node
		default:
			break loop
		}
	}
	for i, j := 0, len(props)-1; i < j; i, j = i+1, j-1 {
		props[i], props[j] = props[j], props[i]
		members[i], members[j] = members[j], members[i]
	}
	if id, ok := cur.(*ast.IdentifierNode); ok {
		c.path(id, props, members)
	} else {
		c.visit(cur)
	}
	for _, p := range props {
		if _, lit := p.(*ast.StringNode); !lit {
			c.visit(p)
		}
	}
}

// path checks the root identifier id followed by the properties props
// (string literals are known names; anything else is dynamic).
func (c *refChecker) path(id *ast.IdentifierNode, props, members []ast.Node) {
	name := id.Value
	if c.isLet(name) {
		return
	}
	lit := func(i int) (string, bool) {
		if i >= len(props) {
			return "", false
		}
		s, ok := props[i].(*ast.StringNode)
		if !ok {
			return "", false
		}
		return s.Value, true
	}
	at := func(i int) ast.Node { return props[i] }
	te := c.te
	switch name {
	case "inputs":
		x, ok := lit(0)
		if !ok {
			c.refs = append(c.refs, Ref{Kind: "input"})
			return
		}
		if te != nil {
			if _, known := te.Inputs[x]; !known {
				c.fail(at(0), "unknown input %q%s", x, suggest.Hint(x, keys(te.Inputs)))
				return
			}
		}
		c.refs = append(c.refs, Ref{Kind: "input", Name: x})
	case "steps":
		c.steps(lit, at)
	case "env", "secrets", "trigger":
		kind := map[string]string{"env": "env", "secrets": "secret", "trigger": "trigger"}[name]
		x, _ := lit(0)
		c.refs = append(c.refs, Ref{Kind: kind, Name: x})
	case "run":
		if x, ok := lit(0); ok && !contains(runFields, x) {
			c.fail(at(0), "run has no field %q (fields: %s)", x, strings.Join(runFields, ", "))
		}
	case "item", "index":
		if te != nil && !te.Item {
			c.fail(id, "%s is only defined inside for_each", name)
			return
		}
		c.refs = append(c.refs, Ref{Kind: "item"})
	case "result":
		c.result = true
		if te != nil && !te.Result {
			c.fail(id, "result is only defined in a step's outputs")
		}
	case "error":
		c.errRef = true
		if te != nil && !te.Error {
			c.fail(id, "error is only defined in retry.if")
			return
		}
		if x, ok := lit(0); ok && !contains(errorFields, x) {
			c.fail(at(0), "error has no field %q (fields: %s)", x, strings.Join(errorFields, ", "))
		}
	default:
		if _, isFunc := funcSpecs[name]; isFunc || statusFuncs[name] {
			c.fail(id, "%s is a function; call it as %s(...)", name, name)
			return
		}
		c.fail(id, "unknown name %q%s", name, suggest.Hint(name, roots))
	}
}

func (c *refChecker) steps(lit func(int) (string, bool), at func(int) ast.Node) {
	te := c.te
	id, ok := lit(0)
	if !ok {
		c.refs = append(c.refs, Ref{Kind: "step"})
		return
	}
	var st StepType
	if te != nil {
		if !te.AllSteps[id] {
			c.fail(at(0), "unknown step %q%s", id, suggest.Hint(id, boolKeys(te.AllSteps)))
			return
		}
		var visible bool
		st, visible = te.Steps[id]
		if !visible {
			c.fail(at(0), "step %q does not run before this step; add it to needs", id)
			return
		}
	}
	field, ok := lit(1)
	if !ok {
		c.refs = append(c.refs, Ref{Kind: "step", Name: id})
		return
	}
	switch field {
	case "outputs":
		out, ok := lit(2)
		if !ok {
			c.refs = append(c.refs, Ref{Kind: "step", Name: id})
			return
		}
		if te != nil && !st.Open {
			names := st.Outputs
			if st.ForEach {
				names = map[string]bool{"items": true, "count": true}
			}
			if !names[out] {
				list := boolKeys(names)
				if len(list) == 0 {
					c.fail(at(2), "step %q has no output %q (it has no outputs)", id, out)
				} else {
					c.fail(at(2), "step %q has no output %q (outputs: %s)%s", id, out, strings.Join(list, ", "), suggest.Hint(out, list))
				}
				return
			}
		}
		c.refs = append(c.refs, Ref{Kind: "step", Name: id, Output: out})
	case "status":
		c.refs = append(c.refs, Ref{Kind: "step", Name: id})
	case "error":
		if x, ok := lit(2); ok && !contains(errorFields, x) {
			c.fail(at(2), "error has no field %q (fields: %s)", x, strings.Join(errorFields, ", "))
			return
		}
		c.refs = append(c.refs, Ref{Kind: "step", Name: id})
	default:
		c.fail(at(1), "step %q has no field %q (fields: %s)%s", id, field, strings.Join(stepFields, ", "), suggest.Hint(field, stepFields))
	}
}

// children returns pointers to the child nodes of n.
func children(n ast.Node) []*ast.Node {
	switch n := n.(type) {
	case *ast.UnaryNode:
		return []*ast.Node{&n.Node}
	case *ast.BinaryNode:
		return []*ast.Node{&n.Left, &n.Right}
	case *ast.ChainNode:
		return []*ast.Node{&n.Node}
	case *ast.MemberNode:
		return []*ast.Node{&n.Node, &n.Property}
	case *ast.SliceNode:
		out := []*ast.Node{&n.Node}
		if n.From != nil {
			out = append(out, &n.From)
		}
		if n.To != nil {
			out = append(out, &n.To)
		}
		return out
	case *ast.CallNode:
		out := []*ast.Node{&n.Callee}
		for i := range n.Arguments {
			out = append(out, &n.Arguments[i])
		}
		return out
	case *ast.BuiltinNode:
		out := make([]*ast.Node, 0, len(n.Arguments))
		for i := range n.Arguments {
			out = append(out, &n.Arguments[i])
		}
		return out
	case *ast.PredicateNode:
		return []*ast.Node{&n.Node}
	case *ast.ConditionalNode:
		return []*ast.Node{&n.Cond, &n.Exp1, &n.Exp2}
	case *ast.VariableDeclaratorNode:
		return []*ast.Node{&n.Value, &n.Expr}
	case *ast.SequenceNode:
		out := make([]*ast.Node, 0, len(n.Nodes))
		for i := range n.Nodes {
			out = append(out, &n.Nodes[i])
		}
		return out
	case *ast.ArrayNode:
		out := make([]*ast.Node, 0, len(n.Nodes))
		for i := range n.Nodes {
			out = append(out, &n.Nodes[i])
		}
		return out
	case *ast.MapNode:
		out := make([]*ast.Node, 0, len(n.Pairs))
		for i := range n.Pairs {
			out = append(out, &n.Pairs[i])
		}
		return out
	case *ast.PairNode:
		return []*ast.Node{&n.Key, &n.Value}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func boolKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func dedupRefs(refs []Ref) []Ref {
	seen := make(map[Ref]bool, len(refs))
	out := refs[:0:0]
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
