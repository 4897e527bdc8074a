package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// SecretSource resolves the agent's own secrets (its environment, its
// secrets file).
type SecretSource interface {
	Lookup(name string) (string, bool)
}

// Masker masks the secret values an attempt saw in what it prints
// (internal/secrets.Redactor).
type Masker interface {
	Add(values ...string)
	String(s string) string
}

// Worker is `runbook agent`: it registers with a server, polls it for the
// step attempts assigned to it and executes them with the step registry
// of this binary.
type Worker struct {
	Server   string // base URL: https://runbook.example.com
	Token    string
	Client   *http.Client
	Name     string
	Labels   map[string]string
	Capacity int
	// Limits bound the attempts at once of the playbooks each selects:
	// the server places no more on it.
	Limits  []state.AgentLimit
	Version string
	// Dir is the directory a step's relative paths resolve against.
	Dir     string
	Secrets SecretSource
	Masker  Masker
	Logger  *slog.Logger
	// Retry is the pause between failed requests (default 1 s).
	Retry time.Duration

	mu      sync.Mutex
	session string
	keys    keyPair // this session's: its assignments are sealed to it
	running map[string]context.CancelCauseFunc
	// unlisted are the assignments received since the last poll the
	// server answered: the next poll lists them with the running ones, so
	// that the server knows the agent has them (an assignment handed over
	// and never listed is handed over again: its answer may have been
	// lost), even if they ended meanwhile.
	unlisted map[string]bool
	// sent are the results sent lately, kept for a server that asks for
	// one again (AgentWork.Resend: the replica it reached stopped before
	// the run's next owner could read it).
	sent map[string]sentResult
	wg   sync.WaitGroup
}

type sentResult struct {
	res api.AgentResult
	at  time.Time
}

// A sent result is kept for a resend keepSent, and at most maxSent of
// them (the oldest go first).
const (
	keepSent = 10 * time.Minute
	maxSent  = 1000
)

var errCancelled = errors.New("the server withdrew the attempt")

// Run works until ctx ends, then drains: it takes no new work and returns
// once the attempts running have ended and sent their results.
func (w *Worker) Run(ctx context.Context) error {
	if w.Retry <= 0 {
		w.Retry = time.Second
	}
	w.running = map[string]context.CancelCauseFunc{}
	w.unlisted = map[string]bool{}
	w.sent = map[string]sentResult{}
	defer w.wg.Wait()
	for ctx.Err() == nil {
		sess, err := w.register(ctx)
		var fe *fault.Error
		if errors.As(err, &fe) && fe.Code == fault.Unauthorized {
			return err // a wrong, revoked or limited token: trying again changes nothing
		}
		if err != nil {
			w.Logger.Warn("register with the server failed; trying again", "err", err)
			sleep(ctx, w.Retry)
			continue
		}
		w.Logger.Info("registered", "session", sess.Session, "labels", w.Labels, "capacity", w.Capacity, "limits", w.Limits)
		w.poll(ctx, sess)
		w.cancelAll(ErrLost) // the session is gone: nothing it ran is ours any more
	}
	w.Logger.Info("stopped")
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (w *Worker) register(ctx context.Context) (api.AgentSession, error) {
	var s api.AgentSession
	keys := newKeyPair()
	err := w.call(ctx, "/api/v1/agent/register", api.AgentRegister{Name: w.Name, Labels: w.Labels, Capacity: w.Capacity, Limits: w.Limits,
		Version: w.Version, Key: keys.pub[:]}, &s)
	if err == nil {
		w.mu.Lock()
		w.session, w.keys = s.Session, keys
		w.mu.Unlock()
	}
	return s, err
}

// poll takes work until the session is lost, or, once ctx ended, until
// the attempts running end: a draining agent takes no new work (the
// server places none on it) and keeps its lease while they finish.
func (w *Worker) poll(ctx context.Context, sess api.AgentSession) {
	lease := time.Duration(sess.LeaseMS) * time.Millisecond
	failing, failed := time.Time{}, 0
	for {
		draining := ctx.Err() != nil
		if draining && !w.busy() {
			return
		}
		var work api.AgentWork
		pctx, stop := context.WithTimeout(context.WithoutCancel(ctx), pollTimeout(sess))
		listed := w.listed()
		err := w.call(pctx, "/api/v1/agent/poll", api.AgentPoll{Session: sess.Session, Running: listed, Draining: draining}, &work)
		stop()
		if err == nil {
			w.mu.Lock()
			for _, id := range listed {
				delete(w.unlisted, id)
			}
			w.mu.Unlock()
		}
		var fe *fault.Error
		switch {
		case errors.As(err, &fe) && fe.Code == fault.Conflict:
			w.Logger.Warn("the server gave up this agent's session (its lease lapsed); registering again")
			return
		case err != nil:
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) > lease {
				w.Logger.Warn("the server did not answer for a lease; registering again", "err", err)
				return
			}
			// The first failure is tried again at once: behind a load
			// balancer the next request reaches a live replica, and the
			// work placed meanwhile waits for no pause.
			if failed++; failed > 1 {
				sleep(context.WithoutCancel(ctx), w.Retry)
			}
			continue
		}
		failing, failed = time.Time{}, 0
		for _, id := range work.Cancel {
			w.cancel(id, errCancelled)
		}
		for _, id := range work.Resend {
			w.resend(id)
		}
		for _, sealed := range work.Sealed {
			a, err := w.unseal(sealed)
			if err != nil {
				w.Logger.Error("an assignment this agent cannot read", "err", err)
				continue
			}
			w.start(ctx, sess.Session, a)
		}
	}
}

// pollTimeout bounds a poll: the time the server may hold it, then half
// of what is left of the lease after a second hold (at least 100 ms, at
// most 10 s). The lease was last renewed at most a hold before this poll
// began, so a replica that holds the poll and never answers (stopped,
// or cut off by a network that drops its packets: the connection neither
// answers nor breaks) is given up while the lease still holds, and the
// poll sent again at once, which a balancer gives to another replica,
// renews it. Without the bound a poll held so (its hold and 10 s) outlived
// the default 15 s lease, and the agent was lost with its attempts.
func pollTimeout(sess api.AgentSession) time.Duration {
	hold := time.Duration(sess.PollMS) * time.Millisecond
	lease := time.Duration(sess.LeaseMS) * time.Millisecond
	return hold + min(max((lease-2*hold)/2, 100*time.Millisecond), 10*time.Second)
}

// unseal opens an assignment sealed to this session's key.
func (w *Worker) unseal(sealed []byte) (api.AgentAssignment, error) {
	var a api.AgentAssignment
	w.mu.Lock()
	keys := w.keys
	w.mu.Unlock()
	b, ok := keys.open(sealed)
	if !ok {
		return a, errors.New("not sealed to this session's key")
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("decode: %w", err)
	}
	return a, nil
}

// keep keeps a result for a resend.
func (w *Worker) keep(id string, res api.AgentResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	oldest := ""
	for k, sr := range w.sent {
		if now.Sub(sr.at) > keepSent {
			delete(w.sent, k)
		} else if oldest == "" || sr.at.Before(w.sent[oldest].at) {
			oldest = k
		}
	}
	if len(w.sent) >= maxSent {
		delete(w.sent, oldest)
	}
	w.sent[id] = sentResult{res: res, at: now}
}

// resend sends a result again, which the server asks for.
func (w *Worker) resend(id string) {
	w.mu.Lock()
	sr, ok := w.sent[id]
	w.mu.Unlock()
	if !ok {
		w.Logger.Warn("the server asks again for a result this agent no longer keeps", "assignment", id)
		return
	}
	w.wg.Go(func() { w.sendResult(context.Background(), w.Logger.With("assignment", id), id, sr.res) })
}

// busy reports whether an attempt runs.
func (w *Worker) busy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running) > 0
}

// listed is what a poll lists as running: the assignments running, and
// those received since the last poll the server answered.
func (w *Worker) listed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.running)+len(w.unlisted))
	for id := range w.running {
		ids = append(ids, id)
	}
	for id := range w.unlisted {
		if w.running[id] == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

func (w *Worker) cancel(id string, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.running[id]; c != nil {
		c(cause)
	}
}

func (w *Worker) cancelAll(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.running {
		c(cause)
	}
}

// start executes an assignment on a goroutine of its own, unless this
// agent runs it already or ran it: an assignment is placed once, but the
// server may hand it over again (it records the handing over without
// waiting for the disk, and a database that crashed meanwhile forgot it).
func (w *Worker) start(ctx context.Context, session string, a api.AgentAssignment) {
	w.mu.Lock()
	_, running := w.running[a.ID]
	_, ran := w.sent[a.ID]
	w.unlisted[a.ID] = true // the next poll says the agent has it
	w.mu.Unlock()
	if running || ran {
		w.Logger.Debug("the server handed over again an attempt this agent runs or ran; not started again", "assignment", a.ID,
			"run_id", a.RunID, "step", a.Step)
		return
	}
	// Not ended by ctx: a draining agent lets its attempts finish.
	actx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	if a.TimeoutMS > 0 {
		var stop context.CancelFunc
		actx, stop = context.WithTimeout(actx, time.Duration(a.TimeoutMS)*time.Millisecond)
		prev := cancel
		cancel = func(err error) { prev(err); stop() }
	}
	w.mu.Lock()
	w.running[a.ID] = cancel
	w.mu.Unlock()
	started := time.Now()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.running, a.ID)
			w.mu.Unlock()
			cancel(nil)
		}()
		w.execute(actx, session, a, started)
	}()
}

// execute runs one attempt, started at started, and sends its lines and
// its result.
func (w *Worker) execute(ctx context.Context, session string, a api.AgentAssignment, started time.Time) {
	log := w.Logger.With("run_id", a.RunID, "step", a.Step, "attempt", a.Attempt, "assignment", a.ID)
	lines := newLineSender(w, session, a.ID, log)
	h := &workerHost{w: w, ctx: ctx, session: session, id: a.ID}
	call := &steps.Call{RunID: a.RunID, StepID: a.Step, Attempt: a.Attempt, Extra: a.Extra,
		IdempotencyKey: a.IdempotencyKey, Resume: a.Resume, Dir: w.Dir, Now: time.Now, Host: h, Output: lines,
		Log: slog.New(&lineLogger{out: lines, masker: w.Masker})}
	res := api.AgentResult{Session: session, Started: started}
	out, reconciled, err := w.runStep(ctx, call, a)
	lines.close()
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrLost) {
		// Sent all the same: the server refuses it (its lease lapsed),
		// which is what the agent's log then says.
		log.Warn("attempt stopped: the server gave up this agent's session")
	}
	res.Outputs, res.Reconciled = maskOutputs(w.Masker, out), reconciled
	if err != nil {
		res.Error = errorOf(err)
		res.Error.Message = w.Masker.String(res.Error.Message)
	}
	w.keep(a.ID, res)
	if w.sendResult(context.WithoutCancel(ctx), log, a.ID, res) {
		log.Info("attempt ended", "ok", err == nil)
	}
}

// sendResult sends an attempt's result, again while the server cannot
// take it (unavailable), for up to a minute; it reports whether the
// server took it.
func (w *Worker) sendResult(ctx context.Context, log *slog.Logger, id string, res api.AgentResult) bool {
	deadline, tries := time.Now().Add(time.Minute), 0
	for {
		err := w.call(ctx, "/api/v1/agent/assignments/"+id+"/result", res, nil)
		var fe *fault.Error
		switch {
		case err == nil:
			return true
		case errors.As(err, &fe) && fe.Code == fault.Conflict:
			log.Warn("result refused: the lease on this attempt lapsed and the server went on without it")
			return false
		case errors.As(err, &fe) && fe.Code != fault.Unavailable && fe.Code != fault.Internal, time.Now().After(deadline):
			log.Error("send result", "err", err)
			return false
		}
		if tries++; tries > 1 { // the first again at once, as a poll is
			sleep(ctx, w.Retry)
		}
	}
}

// runStep decodes the params and runs the step (reconciling first an
// earlier attempt's intent when the server sent one).
func (w *Worker) runStep(ctx context.Context, call *steps.Call, a api.AgentAssignment) (steps.Outputs, bool, error) {
	d, ok := steps.Lookup(a.Type)
	if !ok {
		return nil, false, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("this agent (version %s) has no step type %q", w.Version, a.Type)}
	}
	if err := w.putSecrets(&a); err != nil {
		return nil, false, err
	}
	call.Extra = a.Extra
	if d.Params != nil && len(a.Params) > 0 {
		p := reflect.New(reflect.TypeOf(d.Params))
		if err := json.Unmarshal(a.Params, p.Interface()); err != nil {
			return nil, false, &fault.Error{Code: fault.Invalid, Message: "decode params", Err: err}
		}
		call.Params = p.Interface()
	}
	if in := a.Reconcile; in != nil && d.Reconcile != nil {
		out, found, err := d.Reconcile(ctx, call, steps.Intent{RunID: a.RunID, Step: a.Step, Attempt: in.Attempt,
			IdempotencyKey: in.IdempotencyKey, CreatedAt: in.CreatedAt, Data: in.Data})
		if err != nil {
			return nil, false, fmt.Errorf("reconcile %s: %w", a.Step, err)
		}
		if found {
			return out, true, nil
		}
	}
	out, err := d.Run(steps.WatchCalls(ctx, call), call)
	return out, false, err
}

// call POSTs body to path and decodes the answer into out; an error
// answer becomes a *fault.Error with its code.
func (w *Worker) call(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(w.Server, "/")+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.Token)
	resp, err := w.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		_ = json.Unmarshal(data, &eb)
		code := fault.Code(eb.Code)
		if code == "" {
			code = fault.Unavailable
		}
		return &fault.Error{Code: code, Message: fmt.Sprintf("%s: %d %s", path, resp.StatusCode, eb.Error)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// putSecrets puts the agent's own secrets where the assignment's
// placeholders stand for them, in its params and extra, and masks their
// values in everything the attempt sends back.
func (w *Worker) putSecrets(a *api.AgentAssignment) error {
	if len(a.Secrets) == 0 {
		return nil
	}
	extra, err := json.Marshal(a.Extra)
	if err != nil {
		return err
	}
	params := a.Params
	for ph, env := range a.Secrets {
		v, ok := w.Secrets.Lookup(env)
		if !ok {
			return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
				"the agent secret %s is not set on agent %s (its environment or --secrets file)", env, w.Name)}
		}
		w.Masker.Add(v)
		q, _ := json.Marshal(v)
		q = q[1 : len(q)-1] // the value as it reads inside a JSON string
		params = bytes.ReplaceAll(params, []byte(ph), q)
		extra = bytes.ReplaceAll(extra, []byte(ph), q)
	}
	a.Params = params
	a.Extra = nil
	if err := json.Unmarshal(extra, &a.Extra); err != nil {
		return fmt.Errorf("decode extra: %w", err)
	}
	return nil
}

// maskOutputs masks the agent's secrets in a result's strings (after a
// JSON round trip, which is how the result travels anyway: typed values
// become maps and lists whose strings are reached).
func maskOutputs(m Masker, out map[string]any) map[string]any {
	if b, err := json.Marshal(out); err == nil {
		var plain map[string]any
		if json.Unmarshal(b, &plain) == nil {
			out = plain
		}
	}
	return maskPlain(m, out)
}

func maskPlain(m Masker, out map[string]any) map[string]any {
	for k, v := range out {
		out[k] = maskValue(m, v)
	}
	return out
}

func maskValue(m Masker, v any) any {
	switch x := v.(type) {
	case string:
		return m.String(x)
	case map[string]any:
		return maskPlain(m, x)
	case []any:
		for i := range x {
			x[i] = maskValue(m, x[i])
		}
	}
	return v
}
