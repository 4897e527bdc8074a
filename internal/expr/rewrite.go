package expr

import (
	"reflect"
	"strconv"

	"github.com/expr-lang/expr/ast"
)

// rewrite transforms a checked tree before type checking and compiling:
//
//   - calls of this package's functions become calls of their hidden
//     "__name" with the evaluation state __rt as first argument;
//   - success(), failure(), cancelled() read booleans of the env struct,
//     always() is true;
//   - every closure body is prefixed with __tick(__rt), which counts
//     iterations against MaxIterations;
//   - member access is nil-safe (a missing key or a nil value yields nil
//     all along the chain), and env.X / secrets.X yield nil when missing.
func rewrite(np *ast.Node) {
	switch x := (*np).(type) {
	case *ast.MemberNode, *ast.ChainNode:
		rewriteChain(np)
		return
	case *ast.CallNode:
		id, ok := x.Callee.(*ast.IdentifierNode)
		if !ok {
			break
		}
		for i := range x.Arguments {
			rewrite(&x.Arguments[i])
		}
		switch id.Value {
		case "always":
			b := &ast.BoolNode{Value: true}
			b.SetLocation(x.Location())
			*np = b
			return
		case "success", "failure", "cancelled":
			*np = ident("__"+id.Value, x)
			return
		}
		if _, ok := funcSpecs[id.Value]; ok {
			id.Value = "__" + id.Value
			x.Arguments = append([]ast.Node{ident("__rt", x)}, x.Arguments...)
		}
		return
	case *ast.PredicateNode:
		rewrite(&x.Node)
		tick := &ast.CallNode{Callee: ident("__tick", x), Arguments: []ast.Node{ident("__rt", x)}}
		tick.SetLocation(x.Location())
		seq := &ast.SequenceNode{Nodes: []ast.Node{tick, x.Node}}
		seq.SetLocation(x.Location())
		x.Node = seq
		return
	}
	for _, ch := range children(*np) {
		rewrite(ch)
	}
}

func ident(name string, at ast.Node) *ast.IdentifierNode {
	id := &ast.IdentifierNode{Value: name}
	id.SetLocation(at.Location())
	return id
}

func rewriteChain(np *ast.Node) {
	p := np
walk:
	for {
		switch m := (*p).(type) {
		case *ast.ChainNode:
			p = &m.Node
		case *ast.MemberNode:
			if id, ok := m.Node.(*ast.IdentifierNode); ok && (id.Value == "env" || id.Value == "secrets") && !m.Method {
				rewrite(&m.Property)
				call := &ast.CallNode{Callee: ident("__strget", m), Arguments: []ast.Node{m.Node, m.Property}}
				call.SetLocation(m.Location())
				*p = call
				break walk
			}
			if !m.Method {
				m.Optional = true
			}
			if _, lit := m.Property.(*ast.StringNode); !lit {
				rewrite(&m.Property)
			}
			p = &m.Node
		default:
			rewrite(p)
			break walk
		}
	}
	if _, ok := (*np).(*ast.ChainNode); !ok {
		if _, ok := (*np).(*ast.MemberNode); ok {
			ch := &ast.ChainNode{Node: *np}
			ch.SetLocation((*np).Location())
			*np = ch
		}
	}
}

// addPatcher replaces s matches <dynamic pattern> with __matches, which
// counts the pattern against MaxOutputBytes (compiling a long pattern in
// a loop would otherwise be unbounded work), and a + b, unless both sides are known numbers, with
// __add(__rt, a, b), which bounds string concatenation (doubling a string
// in a reduce would otherwise exhaust memory in a few dozen iterations).
type addPatcher struct{}

func (addPatcher) Visit(node *ast.Node) {
	b, ok := (*node).(*ast.BinaryNode)
	if !ok {
		return
	}
	if b.Operator == "matches" {
		if _, constant := b.Right.(*ast.StringNode); !constant {
			call := &ast.CallNode{Callee: ident("__matches", b), Arguments: []ast.Node{ident("__rt", b), b.Left, b.Right}}
			call.SetLocation(b.Location())
			*node = call
		}
		return
	}
	if b.Operator != "+" {
		return
	}
	if isNumber(b.Left.Type()) && isNumber(b.Right.Type()) {
		return
	}
	call := &ast.CallNode{Callee: ident("__add", b), Arguments: []ast.Node{ident("__rt", b), b.Left, b.Right}}
	call.SetLocation(b.Location())
	*node = call
}

func isNumber(t reflect.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

var predicateBuiltins = map[string]bool{
	"all": true, "none": true, "any": true, "one": true, "filter": true, "map": true,
	"find": true, "findIndex": true, "findLast": true, "findLastIndex": true,
	"count": true, "sum": true, "groupBy": true, "sortBy": true, "reduce": true,
}

// estimateCost estimates the closure iterations of a tree: a closure
// builtin costs the size of its collection times (1 + the cost of its
// body). Literal ranges and arrays have a known size; any other collection
// counts as 1 here, and the run-time counter bounds it. It returns the
// estimate and the innermost node where it first exceeds MaxIterations.
func estimateCost(n ast.Node) (float64, ast.Node) {
	var worst ast.Node
	var cost func(n ast.Node) float64
	cost = func(n ast.Node) float64 {
		if n == nil {
			return 0
		}
		total := 0.0
		if b, ok := n.(*ast.BuiltinNode); ok && predicateBuiltins[b.Name] && len(b.Arguments) >= 2 {
			if pred, ok := b.Arguments[1].(*ast.PredicateNode); ok {
				total = cost(b.Arguments[0]) + staticSize(b.Arguments[0])*(1+cost(pred.Node))
				for _, a := range b.Arguments[2:] {
					total += cost(a)
				}
				if total > MaxIterations && worst == nil {
					worst = n
				}
				return total
			}
		}
		for _, ch := range children(n) {
			total += cost(*ch)
		}
		return total
	}
	total := cost(n)
	if worst == nil {
		worst = n
	}
	return total, worst
}

func staticSize(n ast.Node) float64 {
	switch x := n.(type) {
	case *ast.BinaryNode:
		if x.Operator == ".." {
			a, okA := intLit(x.Left)
			b, okB := intLit(x.Right)
			if okA && okB {
				if b < a {
					return 0
				}
				return float64(b) - float64(a) + 1
			}
		}
	case *ast.ArrayNode:
		return float64(len(x.Nodes))
	}
	return 1
}

func intLit(n ast.Node) (int, bool) {
	switch x := n.(type) {
	case *ast.IntegerNode:
		return x.Value, true
	case *ast.UnaryNode:
		if x.Operator == "-" {
			v, ok := intLit(x.Node)
			return -v, ok
		}
	}
	return 0, false
}

func approx(n float64) string {
	if n < 1e9 {
		return strconv.FormatFloat(n, 'f', 0, 64)
	}
	return strconv.FormatFloat(n, 'g', 3, 64)
}
