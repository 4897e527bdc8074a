package engine_test

import (
	"context"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

const secretInputPlaybook = `
version: 1
name: secret-input
inputs:
  pw: {type: string, secret: true}
steps:
  - {id: a, uses: log, with: {message: "pw ${{ inputs.pw }}"}}
`

func TestPrepare(t *testing.T) {
	t.Run("Prepare commits nothing and returns the record Start would commit", func(t *testing.T) {
		h := newHarness(t)
		pb := h.load(secretInputPlaybook)
		r, ev, err := h.engine.Prepare(pb, engine.StartRequest{
			Inputs: map[string]any{"pw": "zebra-unique-78"}, Trigger: map[string]any{"type": "webhook", "echo": "zebra-unique-78"}})
		require.NoError(t, err)
		assert.Equal(t, state.RunPending, r.Status)
		assert.Equal(t, "***", r.Inputs["pw"], "the secret input is masked before anything is written")
		assert.Equal(t, "***", r.Trigger["echo"], "so is the secret where the trigger repeats it")
		assert.Equal(t, "run.created", ev.Type)
		_, err = h.store.GetRun(context.Background(), r.ID)
		require.ErrorIs(t, err, state.ErrNotFound)
		assert.Empty(t, h.eventOrder("run.created"), "nothing is observed before the commit")

		require.NoError(t, h.store.CreateRun(context.Background(), r, ev))
		h.engine.Committed(r, ev)
		assert.Equal(t, []string{"run.created "}, h.eventOrder("run.created"))
		final, err := h.engine.ExecuteInputs(context.Background(), pb, r, map[string]any{"pw": "zebra-unique-78"})
		require.NoError(t, err)
		assert.Equal(t, state.RunSucceeded, final.Status)
	})
	t.Run("Prepare refuses bad inputs as Start does", func(t *testing.T) {
		h := newHarness(t)
		_, _, err := h.engine.Prepare(h.load(secretInputPlaybook), engine.StartRequest{Inputs: map[string]any{"pw": 12}})
		require.Error(t, err)
	})
	t.Run("generated IDs are distinct within a process, even in one second", func(t *testing.T) {
		h := newHarness(t) // its clock stands still
		pb := h.load(secretInputPlaybook)
		format := regexp.MustCompile(`^\d{8}T\d{6}-[0-9a-f]{6}$`)
		const workers, each = 4, 5000
		ids := make([][]string, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range each {
					r, _, err := h.engine.Prepare(pb, engine.StartRequest{Inputs: map[string]any{"pw": "x"}})
					if err != nil {
						t.Error(err)
						return
					}
					ids[w] = append(ids[w], r.ID)
				}
			})
		}
		wg.Wait()
		seen := map[string]bool{}
		for _, list := range ids {
			for _, id := range list {
				require.Regexp(t, format, id)
				require.False(t, seen[id], "ID %s drawn twice", id)
				seen[id] = true
			}
		}
		assert.Len(t, seen, workers*each)
	})
}
