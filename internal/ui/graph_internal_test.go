package ui

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/api"
)

func TestReducedParents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []api.StepSpec
		want  [][]int
	}{
		{"steps in order draw as a chain, not every pair",
			[]api.StepSpec{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}},
			[][]int{nil, {0}, {1}, {2}}},
		{"a diamond keeps both branches",
			[]api.StepSpec{{ID: "a"}, {ID: "b", Needs: []string{"a"}}, {ID: "c", Needs: []string{"a"}}, {ID: "d", Needs: []string{"b", "c"}}},
			[][]int{nil, {0}, {0}, {2, 1}}},
		{"a need that another need implies is not drawn",
			[]api.StepSpec{{ID: "a"}, {ID: "b", Needs: []string{"a"}}, {ID: "c", Needs: []string{"a", "b"}}},
			[][]int{nil, {0}, {1}}},
		{"a step written after the one that needs it",
			[]api.StepSpec{{ID: "a", Needs: []string{"b"}}, {ID: "b", Needs: []string{}}},
			[][]int{{1}, nil}},
		{"after parallel steps, one written without needs waits for both ends",
			[]api.StepSpec{{ID: "a", Needs: []string{}}, {ID: "b", Needs: []string{}}, {ID: "c"}},
			[][]int{nil, nil, {1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := reducedParents(tc.steps)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLayoutPutsEachStepBelowWhatItWaitsFor(t *testing.T) {
	steps := []api.StepSpec{{ID: "a"}, {ID: "b", Needs: []string{"a"}}, {ID: "c", Needs: []string{"a"}}, {ID: "d", Needs: []string{"b", "c"}}}
	g := layoutGraph("steps", steps, func(string) nodeState { return nodeState{Status: "succeeded"} })
	y := map[string]int{}
	for _, n := range g.Nodes {
		y[n.ID] = n.Y
	}
	assert.Less(t, y["a"], y["b"])
	assert.Equal(t, y["b"], y["c"], "b and c run side by side")
	assert.Less(t, y["c"], y["d"])
	assert.Len(t, g.Edges, 4)
}
