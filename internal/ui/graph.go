package ui

import (
	"fmt"
	"slices"

	"github.com/runbook/runbook/internal/api"
)

// The geometry of a step graph, in SVG user units (pixels).
const (
	nodeW, nodeH   = 180, 44
	gapX, gapY     = 18, 36
	graphPad       = 8
	maxRowNodes    = 6  // a layer wider than this wraps onto more rows
	nodeLabelRunes = 20 // longer step IDs are cut in the box (the title has them whole)
	nodeSubRunes   = 26 // likewise the line under it
)

// graph is a laid-out step list: a layered drawing of its DAG, top to
// bottom, each step below the steps it waits for.
type graph struct {
	Name          string
	Width, Height int
	Nodes         []graphNode
	Edges         []string // SVG path data
}

type graphNode struct {
	ID, Label, Uses, Status, Icon string
	X, Y                          int
	W, H                          int
	// Count is a for_each step's items done of all (12/50); Duration how
	// long the step ran (or runs).
	Count, Duration string
}

// Sub is the node's second line: the step type, its for_each count and
// its duration, cut to the box.
func (n graphNode) Sub() string {
	s := n.Uses
	for _, part := range []string{n.Count, n.Duration} {
		if part != "" {
			s += " · " + part
		}
	}
	if r := []rune(s); len(r) > nodeSubRunes {
		s = string(r[:nodeSubRunes-1]) + "…"
	}
	return s
}

// nodeState is what a node shows of its step besides its ID and type.
type nodeState struct {
	Status, Count, Duration string
}

// bitset is a set of step indices.
type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

// reducedParents returns, for each step, the steps it waits for directly:
// `needs` as written, or every step written before it, minus those another
// of them already waits for (the transitive reduction, so a list of steps
// in order draws as a chain, not as every pair). order is a topological
// order of the steps.
func reducedParents(steps []api.StepSpec) (parents [][]int, order []int) {
	n := len(steps)
	index := make(map[string]int, n)
	for i, s := range steps {
		index[s.ID] = i
	}
	deps := make([][]int, n)
	for i, s := range steps {
		if s.Needs == nil {
			for j := range i {
				deps[i] = append(deps[i], j)
			}
			continue
		}
		for _, need := range s.Needs {
			if j, ok := index[need]; ok && j != i {
				deps[i] = append(deps[i], j)
			}
		}
	}
	order = topoOrder(deps)
	pos := make([]int, n) // position of each step in order
	for k, i := range order {
		pos[i] = k
	}
	anc := make([]bitset, n) // strict ancestors of each step
	parents = make([][]int, n)
	for _, i := range order {
		// Candidates from the latest in the order back: a candidate that
		// another one (later in the order) waits for is covered by then.
		cand := slices.Clone(deps[i])
		slices.SortFunc(cand, func(a, b int) int { return pos[b] - pos[a] })
		covered := newBitset(n)
		for _, j := range cand {
			if covered.has(j) {
				continue
			}
			parents[i] = append(parents[i], j)
			if anc[j] != nil { // nil only in a cycle, which the loader refuses
				covered.or(anc[j])
			}
			covered.set(j)
		}
		anc[i] = covered
	}
	return parents, order
}

// topoOrder orders steps after the steps they depend on, in written order
// otherwise; a cycle (which the loader refuses) keeps written order.
func topoOrder(deps [][]int) []int {
	n := len(deps)
	done := make([]bool, n)
	order := make([]int, 0, n)
	for len(order) < n {
		progressed := false
		for i := range n {
			if done[i] {
				continue
			}
			ready := true
			for _, j := range deps[i] {
				if !done[j] {
					ready = false
					break
				}
			}
			if ready {
				done[i], progressed = true, true
				order = append(order, i)
			}
		}
		if !progressed {
			for i := range n {
				if !done[i] {
					done[i] = true
					order = append(order, i)
				}
			}
		}
	}
	return order
}

// layoutGraph draws a step list; state gives each step's status, for_each
// count and duration.
func layoutGraph(name string, steps []api.StepSpec, state func(id string) nodeState) *graph {
	g := &graph{Name: name}
	if len(steps) == 0 {
		return g
	}
	parents, order := reducedParents(steps)
	layer := make([]int, len(steps))
	maxLayer := 0
	for _, i := range order {
		for _, p := range parents[i] {
			layer[i] = max(layer[i], layer[p]+1)
		}
		maxLayer = max(maxLayer, layer[i])
	}
	byLayer := make([][]int, maxLayer+1)
	for i, l := range layer {
		byLayer[l] = append(byLayer[l], i)
	}
	pos := make([][2]int, len(steps))
	row, cols := 0, 1
	for _, members := range byLayer {
		for k, i := range members {
			r, c := row+k/maxRowNodes, k%maxRowNodes
			pos[i] = [2]int{graphPad + c*(nodeW+gapX), graphPad + r*(nodeH+gapY)}
			cols = max(cols, c+1)
		}
		row += (len(members) + maxRowNodes - 1) / maxRowNodes
	}
	g.Width = 2*graphPad + cols*(nodeW+gapX) - gapX
	g.Height = 2*graphPad + row*(nodeH+gapY) - gapY
	for i, s := range steps {
		ns := state(s.ID)
		label := s.ID
		if r := []rune(label); len(r) > nodeLabelRunes {
			label = string(r[:nodeLabelRunes-1]) + "…"
		}
		g.Nodes = append(g.Nodes, graphNode{ID: s.ID, Label: label, Uses: s.Uses, Status: ns.Status, Icon: statusIcon(ns.Status),
			X: pos[i][0], Y: pos[i][1], W: nodeW, H: nodeH, Count: ns.Count, Duration: ns.Duration})
		for _, p := range parents[i] {
			x1, y1 := pos[p][0]+nodeW/2, pos[p][1]+nodeH
			x2, y2 := pos[i][0]+nodeW/2, pos[i][1]
			mid := (y1 + y2) / 2
			g.Edges = append(g.Edges, fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1, mid, x2, mid, x2, y2))
		}
	}
	return g
}
