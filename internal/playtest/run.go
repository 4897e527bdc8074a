package playtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/all" // every simulator a case may drive
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	_ "github.com/runbook/runbook/internal/steps/all" // every built-in step type
)

// Options configure how cases run.
type Options struct {
	// Environ is the base of the environment a run sees as `env` (default:
	// PATH, HOME, TMPDIR, LANG and the XDG_* directories of this process).
	// The case adds TEST_DIR, TEST_SINK and its own env.
	Environ []string
	// Timeout bounds one case, in real time (default DefaultTimeout).
	Timeout time.Duration
	// Dir is where case directories are made (default os.TempDir()).
	Dir string
	// Keep leaves each case directory in place (its path is in the result).
	Keep bool
}

// DefaultTimeout bounds a case that never ends (a wait that the world
// never satisfies).
const DefaultTimeout = 2 * time.Minute

// Failure is one expectation that did not hold, or a problem that kept
// the case from running, at the position in the test file that says so.
type Failure struct {
	Pos     Pos
	Path    string // the expectation's path, e.g. steps.upgrade.attempts
	Message string
}

// String formats f like a diagnostic: file:line:col: path: message.
func (f Failure) String() string {
	s := f.Pos.String() + ": "
	if f.Path != "" {
		s += f.Path + ": "
	}
	return s + f.Message
}

// Result is the outcome of one case.
type Result struct {
	File     string
	Playbook *playbook.Playbook
	Case     *Case
	Passed   bool
	Failures []Failure
	Duration time.Duration
	// Runs are the runs the case started, in order, with their step
	// records (what coverage reads).
	Runs []RunTrace
	// Dir is the case directory when Options.Keep is set.
	Dir string
	// Env is the run's environment (what `env` held), for coverage.
	Env map[string]string
}

// Name is the case's full name: the test file's base name without
// .test.yaml, a slash, the case name. --run matches it.
func (r *Result) Name() string { return CaseName(r.File, r.Case) }

// CaseName is the full name of case c of file.
func CaseName(file string, c *Case) string {
	return strings.TrimSuffix(filepath.Base(file), Suffix) + "/" + c.Name
}

// RunTrace is one run of a case.
type RunTrace struct {
	ID     string
	Status string // a state.RunStatus, or "refused" when it never started
	Error  *state.ErrorRecord
	Run    *state.Run // nil when refused
	Steps  []*state.StepRecord
}

// caseRun is one case executing: its directory, simulators, state and
// engine, and what happened.
type caseRun struct {
	f    *File
	c    *Case
	o    Options
	dir  string
	pb   *playbook.Playbook // a copy of the file's playbook, placed in dir
	srv  *sim.Server
	sink *sink

	store    *bolt.Store
	env      map[string]string
	environ  []string
	secrets  mapSecrets
	inputs   map[string]any
	secretIn map[string]any // the secret inputs, which a resume needs again
	conns    map[string]map[string]any

	mu         sync.Mutex
	host       *runner.Host   // the host new runs start on
	hosts      []*runner.Host // every host of the case, closed at its end
	runs       []*RunTrace
	deliveries []string
	problems   []Failure
	used       map[*Approval]bool
	killed     bool
	retried    bool
	wg         sync.WaitGroup
}

// RunCase runs one case and checks its expectations. It never panics on a
// playbook's behaviour: what goes wrong is a Failure.
func RunCase(ctx context.Context, f *File, c *Case, o Options) *Result {
	start := time.Now()
	res := &Result{File: f.Path, Playbook: f.Playbook, Case: c}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cr := &caseRun{f: f, c: c, o: o, used: map[*Approval]bool{}}
	defer cr.close(res)
	if err := cr.setup(ctx); err != nil {
		res.Failures = append(res.Failures, Failure{Pos: c.Pos, Message: err.Error()})
	} else if ps := cr.prepare(); len(ps) > 0 {
		res.Failures = append(res.Failures, ps...)
	} else {
		cr.start(ctx)
		cr.wg.Wait()
		if ctx.Err() != nil {
			res.Failures = append(res.Failures, Failure{Pos: c.Pos, Message: fmt.Sprintf("the case did not end within %s (a wait the world never satisfies, or an approval with no answer?)", o.Timeout)})
		}
		res.Runs, res.Env = cr.traces(context.WithoutCancel(ctx)), cr.env
		res.Failures = append(res.Failures, cr.problems...)
		res.Failures = append(res.Failures, cr.check(res.Runs)...)
	}
	res.Passed = len(res.Failures) == 0
	res.Duration = time.Since(start)
	return res
}

// setup makes the case directory, the simulators, the sink and the state.
func (cr *caseRun) setup(ctx context.Context) error {
	dir, err := os.MkdirTemp(cr.o.Dir, "runbook-test-")
	if err != nil {
		return fmt.Errorf("make the case directory: %w", err)
	}
	cr.dir = dir
	cp := *cr.f.Playbook
	cp.Path = filepath.Join(dir, filepath.Base(cr.f.Playbook.Path))
	cp.Dir = dir
	cr.pb = &cp
	for name, content := range cr.c.Files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("files[%s]: %w", name, err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return fmt.Errorf("files[%s]: %w", name, err)
		}
	}
	cr.srv, err = sim.Start(ctx, sim.Options{Speed: cr.c.Speed})
	if err != nil {
		return err
	}
	cr.conns = cr.srv.Connections()
	if cr.sink, err = startSink(cr.srv); err != nil {
		return err
	}
	cr.store, err = bolt.Open(filepath.Join(dir, "state.db"), bolt.Options{Timeout: time.Second, NoSync: true, Now: cr.srv.Clock.Now})
	if err != nil {
		return fmt.Errorf("open the case's state: %w", err)
	}
	return nil
}

// prepare evaluates the case's templates and seeds the world.
func (cr *caseRun) prepare() []Failure {
	c := cr.c
	cr.env = baseEnv(cr.o.Environ)
	cr.env["TEST_DIR"], cr.env["TEST_SINK"] = cr.dir, cr.sink.url
	var out []Failure
	for _, k := range c.EnvKeys {
		v, err := evalString(c.Env[k], &expr.Scope{Env: cr.env})
		if err != nil {
			out = append(out, Failure{Pos: c.Pos, Path: "env." + k, Message: err.Error()})
			continue
		}
		cr.env[k] = v
	}
	scope := &expr.Scope{Env: cr.env}
	cr.secrets = mapSecrets{}
	for k, tv := range c.Secrets {
		v, err := evalString(tv, scope)
		if err != nil {
			out = append(out, Failure{Pos: c.Pos, Path: "secrets." + k, Message: err.Error()})
		}
		cr.secrets[k] = v
	}
	cr.inputs, cr.secretIn = map[string]any{}, map[string]any{}
	for k, tv := range c.Inputs {
		v, err := tv.Eval(scope)
		if err != nil {
			out = append(out, Failure{Pos: c.Pos, Path: "inputs." + k, Message: err.Error()})
		}
		cr.inputs[k] = v
	}
	for _, in := range cr.pb.Inputs {
		if v, ok := cr.inputs[in.Name]; ok && in.Secret {
			cr.secretIn[in.Name] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cr.env)) {
		cr.environ = append(cr.environ, k+"="+cr.env[k])
	}
	out = append(out, seedWorld(cr.srv, c.World)...)
	injectFaults(cr.srv, cr.sink, c.Faults)
	return out
}

// newHost opens a run host over the case's state, simulators and clock:
// the host `runbook run` embeds (runner.Options.Embedded). A kill makes
// a new one, as a restarted process would; new runs start on it.
func (cr *caseRun) newHost(ctx context.Context) (*runner.Host, error) {
	var h *runner.Host
	logger := slog.New(slog.DiscardHandler)
	h = runner.New(runner.Options{Embedded: true, Logger: logger, Engine: engine.Options{
		Store: cr.store, Clock: simClock{cr.srv.Clock}, Secrets: cr.secrets, Redactor: secrets.NewRedactor(),
		Logger: logger, Environ: cr.environ, Connection: cr.connection, Playbooks: engine.Playbooks{Load: cr.load}, Process: "runbook-test",
		Observer: engine.Observer{Event: func(runID string, ev state.Event) { cr.observe(h, runID, ev) }},
	}})
	cr.mu.Lock()
	cr.host = h
	cr.hosts = append(cr.hosts, h)
	cr.mu.Unlock()
	return h, h.Open(ctx)
}

// current returns the host new runs start on.
func (cr *caseRun) current() *runner.Host {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.host
}

// connection resolves a connection to its simulator, under the
// playbook's own settings; a service without a simulator is refused, as
// `runbook run --sim` does: a test never reaches a real service.
func (cr *caseRun) connection(name string, override map[string]any) (map[string]any, error) {
	simConn, ok := cr.conns[name]
	if !ok {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"connection %q has no simulator (simulated: %s); a test never reaches a real service", name, strings.Join(slices.Sorted(maps.Keys(cr.conns)), ", "))}
	}
	out := make(map[string]any, len(override)+len(simConn))
	for k, v := range override {
		out[k] = v
	}
	for k, v := range simConn {
		out[k] = v
	}
	return out, nil
}

// load loads a sub-playbook: from the case directory when the case wrote
// it there, else from the tested playbook's own directory.
func (cr *caseRun) load(path string) (*playbook.Playbook, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if rel, err := filepath.Rel(cr.dir, path); err == nil && filepath.IsLocal(rel) {
			path = filepath.Join(cr.f.Playbook.Dir, rel)
		}
	}
	return playbook.Load(path, playbook.LoadOptions{})
}

// observe is the engine's Observer of host h: it kills the run after the
// step a kill fault names (the run stops unfinished, as its process's
// death would leave it; drive resumes it on a new host).
func (cr *caseRun) observe(h *runner.Host, runID string, ev state.Event) {
	var k *Kill
	for _, f := range cr.c.Faults {
		if f.Kill != nil {
			k = f.Kill
		}
	}
	if k == nil || ev.Step != k.After {
		return
	}
	switch ev.Type {
	case "step.succeeded", "step.failed", "step.skipped":
	default:
		return
	}
	cr.mu.Lock()
	if cr.killed {
		cr.mu.Unlock()
		return
	}
	cr.killed = true
	cr.mu.Unlock()
	h.CancelRun(runID, engine.ErrSuspend)
}

// close stops everything the case started and removes its directory.
func (cr *caseRun) close(res *Result) {
	for _, h := range cr.hosts {
		h.Close()
	}
	if cr.store != nil {
		_ = cr.store.Close()
	}
	if cr.sink != nil {
		cr.sink.close()
	}
	if cr.srv != nil {
		cr.srv.Close()
	}
	if cr.dir == "" {
		return
	}
	if cr.o.Keep {
		res.Dir = cr.dir
		return
	}
	_ = os.RemoveAll(cr.dir)
}

// traces reads back every run of the case with its step records.
func (cr *caseRun) traces(ctx context.Context) []RunTrace {
	cr.mu.Lock()
	runs := slices.Clone(cr.runs)
	cr.mu.Unlock()
	out := make([]RunTrace, 0, len(runs))
	for _, t := range runs {
		tr := *t
		if tr.ID != "" {
			if r, err := cr.store.GetRun(ctx, tr.ID); err == nil {
				tr.Run, tr.Status, tr.Error = r, string(r.Status), r.Error
			}
			tr.Steps, _ = cr.store.Steps(ctx, tr.ID)
		}
		out = append(out, tr)
	}
	return out
}

// simClock is the engine's clock: the simulator's time, and sleeps
// shortened by the simulator's speed (a 30 s retry delay at speed 6000
// takes 5 ms).
type simClock struct{ c *sim.Clock }

func (s simClock) Now() time.Time { return s.c.Now() }

func (s simClock) Sleep(ctx context.Context, d time.Duration) error {
	return engine.Sleep(ctx, s.c.Real(d))
}

// mapSecrets is the engine's secret source: the case's secrets only, so
// a test never reads the secrets of the machine it runs on.
type mapSecrets map[string]string

func (m mapSecrets) Lookup(name string) (string, bool) {
	v, ok := m[name]
	return v, ok
}

// baseEnv keeps the variables of environ a step needs to run programs
// (PATH, HOME, TMPDIR, LANG, XDG_*); nil environ reads this process's.
func baseEnv(environ []string) map[string]string {
	if environ == nil {
		environ = os.Environ()
		out := map[string]string{}
		for _, kv := range environ {
			k, v, _ := strings.Cut(kv, "=")
			if k == "PATH" || k == "HOME" || k == "TMPDIR" || k == "LANG" || strings.HasPrefix(k, "XDG_") {
				out[k] = v
			}
		}
		return out
	}
	out := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// evalString evaluates a template to a string (nil is "").
func evalString(v expr.Value, s *expr.Scope) (string, error) {
	x, err := v.Eval(s)
	if err != nil || x == nil {
		return "", err
	}
	if str, ok := x.(string); ok {
		return str, nil
	}
	return fmt.Sprint(x), nil
}
