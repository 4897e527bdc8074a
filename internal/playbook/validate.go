package playbook

import (
	"fmt"
	"strings"

	"github.com/runbook/runbook/internal/suggest"
	"github.com/runbook/runbook/internal/yamlnode"
)

// resolve checks step ids and needs, detects cycles, fills DependsOn and
// computes which steps finish before each step (its ancestors).
func (l *loader) resolve(ss *stepSet) {
	for _, sn := range ss.all {
		id := sn.step.ID
		if id == "" {
			continue
		}
		if prev, dup := ss.byID[id]; dup {
			l.errf(sn.obj.Get("id"), yamlnode.JoinPath(sn.path, "id"), "duplicate step id %q (first used by %s at line %d)", id, prev.path, prev.step.Pos.Line)
			continue
		}
		ss.byID[id] = sn
		ss.ids[id] = true
	}
	for _, name := range listNames {
		l.order(ss, ss.lists[name])
	}
}

// bitset is a set of step indexes within one list.
type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) or(c bitset) {
	for i := range c {
		b[i] |= c[i]
	}
}
func (b bitset) clone() bitset { return append(bitset(nil), b...) }

// graph orders one step list.
type graph struct {
	l        *loader
	list     []*stepNode
	deps     [][]int // explicit deps (needs), by index
	depNode  [][]int // index into needNodes of each explicit dep
	implicit []bool  // no needs: after every earlier step
	anc      []bitset
	prefix   []bitset // prefix[i]: every step before i and their ancestors
	state    []uint8  // 0 new, 1 active, 2 done
	stack    []int
}

// order resolves needs within one list (steps, on_failure or finally).
func (l *loader) order(ss *stepSet, list []*stepNode) {
	n := len(list)
	idx := make(map[string]int, n)
	var ids []string
	for i, sn := range list {
		if sn.step.ID == "" {
			continue
		}
		if _, dup := idx[sn.step.ID]; !dup {
			idx[sn.step.ID] = i
			ids = append(ids, sn.step.ID)
		}
	}
	g := &graph{l: l, list: list, deps: make([][]int, n), depNode: make([][]int, n), implicit: make([]bool, n),
		anc: make([]bitset, n), prefix: make([]bitset, n+1), state: make([]uint8, n)}
	// Steps without needs depend on every earlier step: they share one
	// backing array (capped slices), so a long list stays linear in memory.
	var earlier []string
	for i, sn := range list {
		st := sn.step
		if i > 0 && list[i-1].step.ID != "" {
			earlier = append(earlier, list[i-1].step.ID)
		}
		if st.Needs == nil {
			g.implicit[i] = true
			st.DependsOn = earlier[:len(earlier):len(earlier)]
			if st.DependsOn == nil {
				st.DependsOn = []string{}
			}
			continue
		}
		st.DependsOn = make([]string, 0, len(st.Needs))
		for k, need := range st.Needs {
			at, path := sn.needNodes[k], yamlnode.JoinPath(sn.path, "needs")
			j, ok := idx[need]
			switch {
			case ok && j == i:
				l.errf(at, path, "step %q cannot need itself", need)
			case ok:
				g.deps[i] = append(g.deps[i], j)
				g.depNode[i] = append(g.depNode[i], k)
				st.DependsOn = append(st.DependsOn, need)
			case ss.ids[need]:
				l.errf(at, path, "step %q is in %s, not %s; needs name steps of the same list", need, ss.byID[need].list, sn.list)
			default:
				l.errf(at, path, "unknown step %q%s", need, suggest.Hint(need, ids))
			}
		}
	}
	for i := range list {
		g.visit(i)
	}
	for i, sn := range list {
		sn.anc = g.anc[i]
	}
}

// visit returns the ancestors of step i, reporting cycles it closes.
func (g *graph) visit(i int) bitset {
	if g.state[i] == 2 {
		return g.anc[i]
	}
	g.state[i] = 1
	g.stack = append(g.stack, i)
	b := newBitset(len(g.list))
	if g.implicit[i] {
		b.or(g.before(i))
	} else {
		for k, j := range g.deps[i] {
			if g.state[j] == 1 {
				g.cycle(i, j, true, g.depNode[i][k])
				continue
			}
			b.or(g.visit(j))
			b.set(j)
		}
	}
	g.stack = g.stack[:len(g.stack)-1]
	g.state[i] = 2
	g.anc[i] = b
	return b
}

// before returns every step written before i with their ancestors.
func (g *graph) before(i int) bitset {
	k := i
	for k > 0 && g.prefix[k] == nil {
		k--
	}
	cur := g.prefix[k]
	if cur == nil {
		cur = newBitset(len(g.list))
		g.prefix[0] = cur
	}
	for j := k; j < i; j++ {
		cur = cur.clone()
		if g.state[j] == 1 {
			g.cycle(i, j, false, -1)
		} else {
			cur.or(g.visit(j))
		}
		cur.set(j)
		g.prefix[j+1] = cur
	}
	return cur
}

// cycle reports the cycle closed by the edge from step i to the active
// step j, at i's needs entry (or at i itself for an implicit edge).
func (g *graph) cycle(i, j int, explicit bool, need int) {
	start := 0
	for s, x := range g.stack {
		if x == j {
			start = s
			break
		}
	}
	var names []string
	for _, x := range g.stack[start:] {
		names = append(names, g.name(x))
	}
	names = append(names, g.name(j))
	sn := g.list[i]
	msg := "cycle in needs: " + strings.Join(names, " -> ")
	if !explicit {
		msg += fmt.Sprintf(" (%s has no needs, so it runs after every step written before it)", g.name(i))
		g.l.errAt(sn.step.Pos, sn.path, "%s", msg)
		return
	}
	g.l.errf(sn.needNodes[need], yamlnode.JoinPath(sn.path, "needs"), "%s", msg)
}

func (g *graph) name(i int) string {
	if id := g.list[i].step.ID; id != "" {
		return id
	}
	return g.list[i].path
}
