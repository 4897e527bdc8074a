package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// takenIDs is the real store answering ErrExists to the first taken
// creations, as a store whose generated IDs another process took would.
type takenIDs struct {
	state.Store
	mu    sync.Mutex
	taken int
	tried []string
}

func (s *takenIDs) CreateRun(ctx context.Context, r *state.Run, evs ...state.Event) error {
	s.mu.Lock()
	s.tried = append(s.tried, r.ID)
	taken := len(s.tried) <= s.taken
	s.mu.Unlock()
	if taken {
		return state.ErrExists
	}
	return s.Store.CreateRun(ctx, r, evs...)
}

func TestStartGivesEachRunItsOwnID(t *testing.T) {
	const src = `
version: 1
name: ids
steps:
  - {id: a, uses: log, with: {message: hi}}
`
	ctx := context.Background()

	t.Run("a given ID that is taken is refused, not replaced", func(t *testing.T) {
		h := newHarness(t)
		pb := h.load(src)
		_, err := h.engine.Start(ctx, pb, engine.StartRequest{ID: "nightly"})
		require.NoError(t, err)
		_, err = h.engine.Start(ctx, pb, engine.StartRequest{ID: "nightly"})
		require.Error(t, err)
		assert.ErrorIs(t, err, state.ErrExists)
		runs, err := h.store.ListRuns(ctx, state.RunFilter{})
		require.NoError(t, err)
		assert.Len(t, runs, 1, "no second run")
	})

	cases := []struct {
		name      string
		taken     int
		wantErr   bool
		wantTries int
	}{
		{name: "a generated ID that is taken is drawn again", taken: 2, wantTries: 3},
		{name: "generated IDs that stay taken give up after 8 draws", taken: 50, wantErr: true, wantTries: 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := &takenIDs{taken: tc.taken}
			h := newHarness(t, func(o *engine.Options) {
				store.Store = o.Store
				o.Store = store
			})
			r, err := h.engine.Start(ctx, h.load(src), engine.StartRequest{})
			assert.Len(t, store.tried, tc.wantTries, "IDs tried")
			runs, lerr := h.store.ListRuns(ctx, state.RunFilter{})
			require.NoError(t, lerr)
			if tc.wantErr {
				require.Error(t, err)
				assert.ErrorIs(t, err, state.ErrExists)
				assert.Empty(t, runs)
				return
			}
			require.NoError(t, err)
			require.Len(t, runs, 1)
			assert.Equal(t, r.ID, runs[0].ID)
			assert.Equal(t, store.tried[len(store.tried)-1], r.ID)
			assert.Len(t, uniq(store.tried), len(store.tried), "every draw is a new ID")
		})
	}
}

func uniq(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// The run record names the process that executes it.
func TestTheRunRecordNamesItsProcess(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.Process = "replica-7" })
	r, err := h.run(gatePlaybook, nil)
	require.NoError(t, err)
	got, err := h.store.GetRun(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, "replica-7", got.Owner)
}

func TestResolveInputs(t *testing.T) {
	h := newHarness(t)
	pb := h.load(`
version: 1
name: inputs
inputs:
  count: {type: integer}
  ratio: {type: number}
  dry: {type: boolean}
  groups: {type: list}
  labels: {type: map}
steps:
  - {id: a, uses: log, with: {message: hi}}
`)
	bare := h.load(`
version: 1
name: bare
steps:
  - {id: a, uses: log, with: {message: hi}}
`)
	cases := []struct {
		name    string
		given   map[string]any
		want    map[string]any
		wantErr string
	}{
		{name: "an integer from the command line", given: map[string]any{"count": " 12 "}, want: map[string]any{"count": 12}},
		{name: "a whole JSON number is an integer", given: map[string]any{"count": 3.0}, want: map[string]any{"count": 3}},
		{name: "a fraction is not an integer", given: map[string]any{"count": 1.5}, wantErr: `input "count": must be an integer (got 1.5)`},
		{name: "a word is not an integer", given: map[string]any{"count": "many"}, wantErr: `input "count": must be an integer (got "many")`},
		{name: "a number from the command line", given: map[string]any{"ratio": "2.5"}, want: map[string]any{"ratio": 2.5}},
		{name: "a word is not a number", given: map[string]any{"ratio": "half"}, wantErr: `input "ratio": must be a number (got "half")`},
		{name: "NaN is not a number", given: map[string]any{"ratio": "NaN"}, wantErr: `input "ratio": must be a number (got "NaN")`},
		{name: "a boolean from the command line", given: map[string]any{"dry": "true"}, want: map[string]any{"dry": true}},
		{name: "maybe is not a boolean", given: map[string]any{"dry": "maybe"}, wantErr: `input "dry": must be true or false (got "maybe")`},
		{name: "a list as JSON", given: map[string]any{"groups": `["a","b"]`}, want: map[string]any{"groups": []any{"a", "b"}}},
		{name: "a list as comma-separated words", given: map[string]any{"groups": "a, b,c"}, want: map[string]any{"groups": []any{"a", "b", "c"}}},
		{name: "a JSON object is not a list", given: map[string]any{"groups": `{"a":1}`}, wantErr: `input "groups": must be a list (got map)`},
		{name: "a fraction is not a list", given: map[string]any{"groups": 1.5}, wantErr: `input "groups": must be a list (got number)`},
		{name: "a map as JSON", given: map[string]any{"labels": `{"team":"ops"}`}, want: map[string]any{"labels": map[string]any{"team": "ops"}}},
		{name: "a map must be JSON", given: map[string]any{"labels": "team=ops"}, wantErr: `input "labels": must be a JSON object (got "team=ops")`},
		{name: "a JSON list is not a map", given: map[string]any{"labels": `["ops"]`}, wantErr: `input "labels": must be a map (got list)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := engine.ResolveInputs(pb, tc.given)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, fault.Invalid, fault.CodeOf(err))
				assert.Equal(t, tc.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			for k, v := range tc.want {
				assert.Equal(t, v, got[k], k)
			}
		})
	}
	t.Run("an input given to a playbook that declares none", func(t *testing.T) {
		_, err := engine.ResolveInputs(bare, map[string]any{"count": 1})
		require.Error(t, err)
		assert.Equal(t, `unknown input "count" (the playbook declares no inputs)`, err.Error())
	})
}

// A resumed or retried run keeps the inputs it started with; only its
// secret inputs, which the record masks, are given again.
func TestWithSecretInputsKeepsTheRunsOtherInputs(t *testing.T) {
	h := newHarness(t)
	pb := h.load(`
version: 1
name: secret-inputs
inputs:
  pw: {type: string, secret: true}
  region: {type: string, default: kr1}
steps:
  - {id: a, uses: log, with: {message: hi}}
`)
	cases := []struct {
		name    string
		inputs  map[string]any
		given   map[string]any
		want    map[string]any
		wantErr string
	}{
		{
			name:   "the secret is given again, the rest is kept",
			inputs: map[string]any{"pw": "***", "region": "kr2"},
			given:  map[string]any{"pw": "zebra"},
			want:   map[string]any{"pw": "zebra", "region": "kr2"},
		},
		{
			name:   "a run recorded without inputs",
			inputs: nil,
			given:  map[string]any{"pw": "zebra"},
			want:   map[string]any{"pw": "zebra"},
		},
		{
			name:    "an input that is not secret cannot be changed",
			inputs:  map[string]any{"pw": "***", "region": "kr2"},
			given:   map[string]any{"region": "kr1"},
			wantErr: "inputs.region: only secret inputs can be given again; run r1 keeps the inputs it started with",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &state.Run{ID: "r1", Inputs: tc.inputs}
			got, err := engine.WithSecretInputs(pb, r, tc.given)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tc.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if tc.inputs != nil {
				assert.Equal(t, "***", r.Inputs["pw"], "the run's record is left as it is")
			}
		})
	}
}

// The playbook's `env:` block adds to (and overrides) the process
// environment that expressions see as env.
func TestPlaybookEnvIsSeenByEveryStep(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: env
inputs:
  region: {type: string, default: kr2}
env:
  REGION: ${{ inputs.region }}
  GREETING: "hi from ${{ inputs.region }}"
  PORT: ${{ 8000 + 80 }}
steps:
  - {id: a, uses: set, with: {region: "${{ env.REGION }}", greeting: "${{ env.GREETING }}", port: "${{ env.PORT }}", home: "${{ env.HOME }}"}}
`, nil)
	require.NoError(t, err)
	out := h.steps(r.ID)["a"].Outputs
	assert.Equal(t, "kr2", out["region"])
	assert.Equal(t, "hi from kr2", out["greeting"], "the playbook overrides the process environment")
	assert.Equal(t, "8080", out["port"], "env values are strings")
	assert.Equal(t, "/nowhere", out["home"], "the process environment is still there")
}

// Connection settings nested in maps and lists are evaluated too.
func TestNestedConnectionSettingsEvaluateExpressions(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: conn-nested
inputs:
  region: {type: string, default: kr2}
connections:
  svc:
    headers: {X-Region: "${{ inputs.region }}", X-Fixed: fixed}
    hosts: ["a.${{ inputs.region }}.example.com", "b.example.com"]
steps:
  - {id: use, uses: test.conn}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunSucceeded, r.Status)
	testProbe.mu.Lock()
	got := testProbe.conn
	testProbe.mu.Unlock()
	assert.Equal(t, map[string]any{"X-Region": "kr2", "X-Fixed": "fixed"}, got["headers"])
	assert.Equal(t, []any{"a.kr2.example.com", "b.example.com"}, got["hosts"])
}

// The inputs a run is executed with are converted to their declared types,
// with defaults for those not given.
func TestRunInputsAreConvertedAndDefaulted(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: typed
inputs:
  n: {type: integer, required: true}
  region: {type: string, default: kr1}
steps:
  - {id: a, uses: set, with: {double: "${{ inputs.n * 2 }}", region: "${{ inputs.region }}"}}
`, map[string]any{"n": "4"})
	require.NoError(t, err)
	out := h.steps(r.ID)["a"].Outputs
	assert.EqualValues(t, 8, out["double"])
	assert.Equal(t, "kr1", out["region"])
}
