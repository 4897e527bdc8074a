package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/all"
)

// fakeClock advances instantly on Sleep and records every delay.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// harness is an engine over a real bbolt file.
type harness struct {
	t      *testing.T
	dir    string
	store  *bolt.Store
	clock  *fakeClock
	engine *engine.Engine
	events []state.Event
	evMu   sync.Mutex
}

func newHarness(t *testing.T, opts ...func(*engine.Options)) *harness {
	t.Helper()
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "state.db"), bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	h := &harness{t: t, dir: dir, store: st, clock: newFakeClock()}
	src, err := secrets.NewSource([]string{"RUNBOOK_SECRET_TOKEN=s3cr3t-t0ken-value"}, "")
	require.NoError(t, err)
	o := engine.Options{
		Store:    st,
		Clock:    h.clock,
		Secrets:  src,
		Redactor: secrets.NewRedactor(),
		Environ:  []string{"HOME=/nowhere", "GREETING=hello"},
		Observer: engine.Observer{Event: func(_ string, ev state.Event) {
			h.evMu.Lock()
			h.events = append(h.events, ev)
			h.evMu.Unlock()
		}},
		Playbooks: engine.Playbooks{
			Load: func(path string) (*playbook.Playbook, error) { return playbook.Load(path, playbook.LoadOptions{}) },
			Parse: func(file string, src []byte) (*playbook.Playbook, error) {
				return playbook.Parse(file, src, playbook.LoadOptions{})
			},
		},
	}
	for _, f := range opts {
		f(&o)
	}
	h.engine = engine.New(o)
	return h
}

// load parses a playbook written in the test (in the harness directory, so
// sub-playbooks resolve next to it).
func (h *harness) load(src string) *playbook.Playbook {
	h.t.Helper()
	path := filepath.Join(h.dir, "playbook.yaml")
	require.NoError(h.t, os.WriteFile(path, []byte(src), 0o600))
	pb, err := playbook.Load(path, playbook.LoadOptions{})
	require.NoError(h.t, err)
	return pb
}

func (h *harness) write(name, src string) {
	h.t.Helper()
	require.NoError(h.t, os.WriteFile(filepath.Join(h.dir, name), []byte(src), 0o600))
}

func (h *harness) run(src string, inputs map[string]any) (*state.Run, error) {
	h.t.Helper()
	return h.engine.Run(context.Background(), h.load(src), engine.StartRequest{Inputs: inputs})
}

func (h *harness) steps(runID string) map[string]*state.StepRecord {
	h.t.Helper()
	recs, err := h.store.Steps(context.Background(), runID)
	require.NoError(h.t, err)
	out := map[string]*state.StepRecord{}
	for _, r := range recs {
		out[r.ID] = r
	}
	return out
}

// stored returns the events of a run the store holds, of the given type
// (every type when empty), in order.
func (h *harness) stored(runID, typ string) []state.Event {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), runID, 0, 0)
	require.NoError(h.t, err)
	var out []state.Event
	for _, ev := range evs {
		if typ == "" || ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// eventOrder lists "type step" for events of the given types, in order.
func (h *harness) eventOrder(types ...string) []string {
	h.evMu.Lock()
	defer h.evMu.Unlock()
	var out []string
	for _, ev := range h.events {
		for _, t := range types {
			if ev.Type == t {
				out = append(out, ev.Type+" "+ev.Step)
			}
		}
	}
	return out
}

// --- test step types -------------------------------------------------------

// probe tracks calls and concurrency of the test step types, per key.
type probe struct {
	mu       sync.Mutex
	calls    map[string]int
	running  int
	maxSeen  int
	creates  map[string]int // resources created by test.create, by name
	conn     map[string]any // what test.conn last received
	released chan struct{}
}

var testProbe = &probe{calls: map[string]int{}, creates: map[string]int{}}

func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = map[string]int{}
	p.creates = map[string]int{}
	p.running, p.maxSeen = 0, 0
}

func (p *probe) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[key]
}

type blockParams struct {
	Key     string         `json:"key" required:"true"`
	Hold    steps.Duration `json:"hold"`
	UntilCx bool           `json:"until_cancelled"`
	// UntilRunning ends the hold early once that many test.block steps
	// run at once: steps meant to overlap are seen to, however slowly a
	// loaded machine starts them, and hold is then only the bound.
	UntilRunning int `json:"until_running"`
}

type flakyParams struct {
	Key   string `json:"key" required:"true"`
	Fails int    `json:"fails"`
	Code  string `json:"code" default:"unavailable"`
}

type createParams struct {
	Name string `json:"name" required:"true"`
	// Hang makes the attempt block after creating, as if the process died
	// before the result was recorded.
	Hang bool `json:"hang"`
}

type refuseParams struct {
	Key   string `json:"key" required:"true"`
	Fails int    `json:"fails"`
	Code  string `json:"code" default:"throttled"`
	// Lost makes a failed call take effect anyway, as when the answer of
	// a call that went through is lost on the way back.
	Lost bool `json:"lost"`
}

// commandParams are the params of test.command, which the engine takes
// through as a shell step (BenchmarkEngineSteps).
type commandParams struct {
	Command string            `json:"command" required:"true"`
	Env     map[string]string `json:"env"`
}

type chattyParams struct {
	Key   string `json:"key" required:"true"`
	Lines int    `json:"lines"`
}

var registerOnce sync.Once

func registerTestSteps() {
	registerOnce.Do(func() {
		steps.Register(steps.Descriptor{
			Type:    "test.block",
			Summary: "counts concurrency; holds for a while or until cancelled",
			Params:  blockParams{},
			Outputs: []steps.Output{{Name: "key", Type: "string"}},
			Run: steps.Typed(func(ctx context.Context, c *steps.Call, p *blockParams) (steps.Outputs, error) {
				testProbe.mu.Lock()
				testProbe.calls[p.Key]++
				testProbe.running++
				if testProbe.running > testProbe.maxSeen {
					testProbe.maxSeen = testProbe.running
				}
				testProbe.mu.Unlock()
				defer func() {
					testProbe.mu.Lock()
					testProbe.running--
					testProbe.mu.Unlock()
				}()
				if p.UntilCx {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				hold := time.After(time.Duration(p.Hold))
				tick := time.NewTicker(2 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-hold:
						return steps.Outputs{"key": p.Key}, nil
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-tick.C:
					}
					testProbe.mu.Lock()
					all := p.UntilRunning > 0 && testProbe.maxSeen >= p.UntilRunning
					testProbe.mu.Unlock()
					if all {
						return steps.Outputs{"key": p.Key}, nil
					}
				}
			}),
		})
		steps.Register(steps.Descriptor{
			Type:       "test.slowline",
			Summary:    "an idempotent step that waits to be released",
			Idempotent: true,
			Run: func(ctx context.Context, c *steps.Call) (steps.Outputs, error) {
				slowLine.Lock()
				release, fail := slowLine.release, slowLine.fails > 0
				slowLine.fails--
				slowLine.Unlock()
				if fail {
					return nil, &fault.Error{Code: fault.Unavailable, Message: "disk busy"}
				}
				select {
				case <-release:
					return steps.Outputs{}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			},
		})
		steps.Register(steps.Descriptor{
			Type:        "test.conn",
			Summary:     "returns the connection it is given",
			OpenOutputs: true,
			Run: func(ctx context.Context, c *steps.Call) (steps.Outputs, error) {
				conn, err := c.Host.Connection("svc")
				if err != nil {
					return nil, err
				}
				testProbe.mu.Lock()
				testProbe.conn = conn
				testProbe.mu.Unlock()
				return steps.Outputs{"conn": conn}, nil
			},
		})
		steps.Register(steps.Descriptor{
			Type:          "test.credential",
			Summary:       "returns a credential as a secret output",
			SecretOutputs: []string{"token"},
			Outputs:       []steps.Output{{Name: "token", Type: "string"}, {Name: "note", Type: "string"}},
			Run: func(ctx context.Context, c *steps.Call) (steps.Outputs, error) {
				return steps.Outputs{"token": "kube-cred-5f0e1d2c", "note": "issued kube-cred-5f0e1d2c"}, nil
			},
		})
		steps.Register(steps.Descriptor{
			Type:    "test.flaky",
			Summary: "fails the first N calls with a given code",
			Params:  flakyParams{},
			Outputs: []steps.Output{{Name: "calls", Type: "integer"}},
			Run: steps.Typed(func(ctx context.Context, c *steps.Call, p *flakyParams) (steps.Outputs, error) {
				testProbe.mu.Lock()
				testProbe.calls[p.Key]++
				n := testProbe.calls[p.Key]
				testProbe.mu.Unlock()
				if n <= p.Fails {
					return nil, &fault.Error{Code: fault.Code(p.Code), Message: "flaky failure " + p.Key}
				}
				return steps.Outputs{"calls": n}, nil
			}),
		})
		steps.Register(steps.Descriptor{
			Type:     "test.create",
			Summary:  "creates a named resource once; reconciles by name",
			Params:   createParams{},
			Outputs:  []steps.Output{{Name: "name", Type: "string"}, {Name: "adopted", Type: "boolean"}},
			Mutating: true,
			Run: steps.Typed(func(ctx context.Context, c *steps.Call, p *createParams) (steps.Outputs, error) {
				testProbe.mu.Lock()
				testProbe.creates[p.Name]++
				testProbe.mu.Unlock()
				if p.Hang {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return steps.Outputs{"name": p.Name, "adopted": false}, nil
			}),
			Reconcile: func(ctx context.Context, c *steps.Call, in steps.Intent) (steps.Outputs, bool, error) {
				p := c.Params.(*createParams)
				testProbe.mu.Lock()
				defer testProbe.mu.Unlock()
				if testProbe.creates[p.Name] > 0 {
					return steps.Outputs{"name": p.Name, "adopted": true}, true, nil
				}
				return nil, false, nil
			},
		})
		steps.Register(steps.Descriptor{
			Type:     "test.refuse",
			Summary:  "creates a resource named key; the first N calls fail with a code",
			Params:   refuseParams{},
			Outputs:  []steps.Output{{Name: "adopted", Type: "boolean"}},
			Mutating: true,
			Run: steps.Typed(func(ctx context.Context, c *steps.Call, p *refuseParams) (steps.Outputs, error) {
				testProbe.mu.Lock()
				defer testProbe.mu.Unlock()
				testProbe.calls[p.Key]++
				if testProbe.calls[p.Key] <= p.Fails {
					if p.Lost {
						testProbe.creates[p.Key]++
					}
					return nil, &fault.Error{Code: fault.Code(p.Code), Message: "call failed " + p.Key}
				}
				testProbe.creates[p.Key]++
				return steps.Outputs{"adopted": false}, nil
			}),
			Reconcile: func(ctx context.Context, c *steps.Call, in steps.Intent) (steps.Outputs, bool, error) {
				p := c.Params.(*refuseParams)
				testProbe.mu.Lock()
				defer testProbe.mu.Unlock()
				testProbe.calls["lookup "+p.Key]++
				if testProbe.creates[p.Key] > 0 {
					return steps.Outputs{"adopted": true}, true, nil
				}
				return nil, false, nil
			},
		})
		steps.Register(steps.Descriptor{
			Type:    "test.chatty",
			Summary: "logs N lines, then holds until cancelled",
			Params:  chattyParams{},
			Run: steps.Typed(func(ctx context.Context, c *steps.Call, p *chattyParams) (steps.Outputs, error) {
				for i := range p.Lines {
					c.Log.Info("line " + strconv.Itoa(i+1))
				}
				testProbe.mu.Lock()
				testProbe.calls[p.Key]++
				testProbe.mu.Unlock()
				<-ctx.Done()
				return nil, ctx.Err()
			}),
		})
		steps.Register(steps.Descriptor{
			Type:    "test.command",
			Summary: "returns the outputs of a shell step that printed nothing, without a process",
			Params:  commandParams{},
			Outputs: steps.CommandOutputs,
			Run: steps.Typed(func(ctx context.Context, c *steps.Call, p *commandParams) (steps.Outputs, error) {
				return steps.Outputs{"exit_code": 0, "stdout": "", "stderr": "", "json": nil, "truncated": false, "duration_ms": int64(0)}, nil
			}),
		})
		steps.Register(steps.Descriptor{
			Type:    "test.logger",
			Summary: "logs through groups and attributes, as a client library would",
			Run: func(ctx context.Context, c *steps.Call) (steps.Outputs, error) {
				c.Log.Info("plain")
				c.Log.With("cluster", "c1").Info("with attrs", "n", 1)
				req := c.Log.WithGroup("req")
				req.Info("grouped", "method", "POST")
				req.With("id", "r1").WithGroup("retry").Info("nested", "attempt", 2)
				c.Log.Info("group attr", slog.Group("resp", "status", 200, slog.Group("hdr", "etag", "x")))
				c.Log.Info("values", "took", 1500*time.Millisecond, "at", time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC), "err", errors.New("boom"))
				return steps.Outputs{}, nil
			},
		})
	})
}

func TestMain(m *testing.M) {
	if path := os.Getenv("RUNBOOK_BENCH_RESUME_DB"); path != "" {
		resumeChild(path) // the restarted process of BenchmarkWaitingRuns
		os.Exit(0)
	}
	registerTestSteps()
	os.Exit(pgtest.Main(m)) // the benchmarks' PostgreSQL, started at first use
}
