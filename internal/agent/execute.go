package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// waiter is an assignment this replica owns: its attempt, what the agent
// receives of it, and what woke it.
type waiter struct {
	id   string
	a    *engine.AgentAttempt
	wire api.AgentAssignment
	wake chan struct{}
	// since is when the attempt was assigned: what a reconcile looks
	// for was made after it.
	since time.Time
	// Set under Dispatcher.mu: where it runs (once placed), and what the
	// last wake-up was about.
	session, agent string
	placed         bool // newly placed: await names the agent
	// placedAt is when this replica's placement of it committed (zero:
	// placed by another replica).
	placedAt  time.Time
	mail, end bool
	// limited says which agents' limits hold it while it waits
	// (state.AgentPlacement.Limited).
	limited string
	// checkpoint is the last data the step recorded (a reconcile's intent
	// data on another agent).
	checkpoint []byte
}

type outcome struct {
	out        steps.Outputs
	err        error
	lost       string // the lost agent's name: no result
	reconciled bool
}

// Execute assigns the attempt to a matching agent with a free slot and
// waits for its result (engine.Agents). When the step has an assignment
// already (placed by the run's previous owner, which stopped), it waits
// for that one instead: the agent runs it still. An agent lost while it
// runs the attempt: a mutating step with a reconcile is assigned again
// with its intent (the next agent reconciles before it calls anything); a
// step with on_agent_lost: retry is assigned once more; any other fails
// with "agent lost".
func (d *Dispatcher) Execute(ctx context.Context, a *engine.AgentAttempt) (steps.Outputs, error) {
	wire, err := assignmentOf(ctx, a)
	if err != nil {
		return nil, err
	}
	retried := false
	for {
		w, err := d.enqueue(ctx, wire, a)
		if err != nil {
			return nil, err
		}
		o, err := d.await(ctx, w)
		d.mu.Lock()
		delete(d.waits, w.id)
		cp, since := w.checkpoint, w.since
		d.mu.Unlock()
		if err != nil {
			return nil, err
		}
		d.drop(w.id)
		if o.lost == "" {
			if o.reconciled {
				a.Call.Log.Info("adopted the result of an earlier attempt, found by reconciling on the agent")
			}
			return o.out, o.err
		}
		if cp != nil {
			wire.Resume = cp // what the lost attempt recorded: the next one goes on from it
		}
		switch {
		case a.Desc.Mutating && a.Desc.Reconcile != nil:
			a.Call.Log.Warn(fmt.Sprintf("agent %s lost (no heartbeat for %s): the attempt is reconciled on an agent before anything is made again", o.lost, d.o.Lease))
			wire.Reconcile = &api.AgentIntent{Attempt: a.Call.Attempt, IdempotencyKey: a.Call.IdempotencyKey, CreatedAt: since, Data: wire.Resume}
		case a.RunsOn.OnAgentLost == playbook.AgentLostRetry && !retried:
			retried = true
			a.Call.Log.Warn(fmt.Sprintf("agent %s lost (no heartbeat for %s): running the attempt once more (on_agent_lost: retry)", o.lost, d.o.Lease))
		default:
			return nil, &fault.Error{Code: fault.Failed, Message: fmt.Sprintf("agent lost: agent %s stopped answering for %s while it ran the step", o.lost, d.o.Lease),
				Data: map[string]any{"agent": o.lost}}
		}
	}
}

// assignmentOf is what an agent receives of attempt a.
func assignmentOf(ctx context.Context, a *engine.AgentAttempt) (api.AgentAssignment, error) {
	c := a.Call
	w := api.AgentAssignment{RunID: c.RunID, Step: c.StepID, Attempt: c.Attempt, Type: a.Desc.Type,
		Extra: c.Extra, IdempotencyKey: c.IdempotencyKey, Resume: c.Resume}
	if c.Params != nil {
		b, err := json.Marshal(c.Params)
		if err != nil {
			return w, fmt.Errorf("encode the params of %s for an agent: %w", c.StepID, err)
		}
		w.Params = b
	}
	extra, _ := json.Marshal(c.Extra)
	w.Secrets = engine.AgentSecretRefs(append(append([]byte{}, w.Params...), extra...))
	if in := a.Reconcile; in != nil {
		w.Reconcile = &api.AgentIntent{Attempt: in.Attempt, IdempotencyKey: in.IdempotencyKey, CreatedAt: in.CreatedAt, Data: in.Data}
	}
	if dl, ok := ctx.Deadline(); ok {
		w.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
	}
	return w, nil
}

// enqueue records the attempt's assignment, or takes the step's existing
// one over, and has it placed.
func (d *Dispatcher) enqueue(ctx context.Context, wire api.AgentAssignment, a *engine.AgentAttempt) (*waiter, error) {
	w := &waiter{id: newID("a-"), a: a, wire: wire, wake: make(chan struct{}, 1), since: time.Now()}
	rec := state.AgentAssignment{ID: w.id, RunID: wire.RunID, Step: wire.Step, Attempt: wire.Attempt, Type: wire.Type,
		Labels: a.RunsOn.Labels, Playbook: a.Playbook, Owner: d.owner, OwnerKey: d.keys.pub[:]}
	// Waited on before it is recorded: a placement may follow at once.
	d.mu.Lock()
	d.waits[w.id] = w
	d.mu.Unlock()
	got, err := retryStore(ctx, func() (state.AgentAssignment, error) { return d.store.AddAgentAssignment(ctx, rec) })
	if err != nil {
		d.mu.Lock()
		delete(d.waits, w.id)
		d.mu.Unlock()
		return nil, err
	}
	d.mu.Lock()
	if got.ID != w.id { // the step's assignment of the run's previous owner
		delete(d.waits, w.id)
		w.id = got.ID
		d.waits[w.id] = w
		w.session, w.agent, w.since = got.Session, got.Agent, got.Created
		w.end = got.Ended()
	}
	d.mu.Unlock()
	if got.ID != rec.ID {
		where := "waiting for an agent"
		if got.Agent != "" {
			where = "on agent " + got.Agent
		}
		a.Call.Log.Info(fmt.Sprintf("attempt %d of this step, placed before the run changed hands, goes on (%s): waiting for its result", got.Attempt, where),
			"agent", got.Agent, "agent_session", got.Session)
		record(ctx, a)
	}
	if got.Session == "" {
		d.placeWaiting(ctx, w) // at once: a matching agent with a free slot takes it now
	}
	return w, nil
}

// retryStore calls fn again while the store is unavailable, until ctx
// ends.
func retryStore[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		v, err := fn()
		if err == nil || !errors.Is(err, state.ErrUnavailable) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
	}
}

// drop deletes an assignment whose end its owner read.
func (d *Dispatcher) drop(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := retryStore(ctx, func() (struct{}, error) { return struct{}{}, d.store.DeleteAgentAssignment(ctx, id) }); err != nil {
		d.o.Logger.Warn("delete an ended agent assignment", "assignment", id, "err", err)
	}
}

// await waits for the assignment's end, naming its agent once placed and
// relaying the mail its agent sent through other replicas. Its error is
// ctx's: the assignment was withdrawn, or, when the run stops here to go
// on elsewhere (a shutdown suspends it, another replica took it over),
// left to the run's next owner.
func (d *Dispatcher) await(ctx context.Context, w *waiter) (outcome, error) {
	log := w.a.Call.Log
	d.mu.Lock()
	noted := w.session != "" // taken over placed: enqueue named its agent
	d.mu.Unlock()
	waiting, said := false, "" // the wait was said, and the limits that held it
	waitNote := time.NewTimer(50 * time.Millisecond)
	defer waitNote.Stop()
	for {
		d.mu.Lock()
		placed, mail, end, agent, session, limited := w.placed, w.mail, w.end, w.agent, w.session, w.limited
		w.placed, w.mail, w.end = false, false, false
		d.mu.Unlock()
		if placed {
			noted = true
			log.Info(fmt.Sprintf("running on agent %s", agent), "agent", agent, "agent_session", session)
			record(ctx, w.a)
		}
		if waiting && session == "" && limited != "" && limited != said {
			said = limited
			log.Info(waitingFor(w.a.RunsOn, limited))
			record(ctx, w.a)
		}
		if mail {
			d.readMail(ctx, w)
		}
		if end {
			if o, ok := d.ended(ctx, w); ok {
				return o, nil
			}
		}
		select {
		case <-w.wake:
		case <-waitNote.C:
			if !noted {
				noted, waiting, said = true, true, limited
				log.Info(waitingFor(w.a.RunsOn, limited))
				record(ctx, w.a)
			}
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(cause, engine.ErrSuspend) || errors.Is(cause, state.ErrFenced) {
				// The run goes on elsewhere, or at the next start: its
				// next owner finds the assignment and waits for it.
				return outcome{}, cause
			}
			return d.withdraw(ctx, w)
		}
	}
}

// record writes the attempt's log so far to its run's record
// (engine.AgentAttempt.Record): where it runs, or what it waits for, is
// read while it runs.
func record(ctx context.Context, a *engine.AgentAttempt) {
	if a.Record != nil {
		a.Record(ctx)
	}
}

// waitingFor is what a step's log says of its attempt while it waits for
// an agent with the labels of ro; limited names the agents whose limits
// hold it (state.AgentPlacer.Limited).
func waitingFor(ro *playbook.RunsOn, limited string) string {
	msg := "waiting for an agent with " + ro.String()
	if limited != "" {
		msg += "; at their limit for this playbook: " + limited
	}
	return msg
}

// ended reads the assignment: its end, when it has one.
func (d *Dispatcher) ended(ctx context.Context, w *waiter) (outcome, bool) {
	rec, err := d.store.AgentAssignment(ctx, w.id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		// Withdrawn and cancelled by another process: the run went on
		// elsewhere; this one's fence stops it.
		d.mu.Lock()
		defer d.mu.Unlock()
		return outcome{lost: w.agent}, true
	case err != nil:
		return outcome{}, false // read again at the next wake-up
	case rec.Lost != "":
		return outcome{lost: rec.Lost}, true
	case rec.Result == nil:
		if rec.Session != "" {
			d.mu.Lock()
			if w.session == "" {
				w.session, w.agent, w.placed = rec.Session, rec.Agent, true
				signal(w.wake)
			}
			d.mu.Unlock()
		}
		return outcome{}, false
	}
	body, ok := d.keys.open(rec.Result)
	if !ok {
		// Sealed for the run's previous owner: the agent sends it again.
		w.a.Call.Log.Info("the attempt's result was sent to the run's previous owner: asking the agent for it again")
		if err := d.store.ResendAgentResult(ctx, w.id); err == nil {
			d.tell(state.AgentSessionSubject(rec.Session))
		}
		return outcome{}, false
	}
	var r api.AgentResult
	if err := json.Unmarshal(body, &r); err != nil {
		return outcome{err: fmt.Errorf("decode the result of agent %s: %w", rec.Agent, err)}, true
	}
	d.readMail(ctx, w) // the lines sent before the result
	d.dispatched(w, r.Started)
	o := outcome{out: wholeNumbers(r.Outputs), reconciled: r.Reconciled}
	if r.Error != nil {
		o.err = &fault.Error{Code: fault.Code(r.Error.Code), Message: r.Error.Message, Data: wholeNumbers(r.Error.Data)}
	}
	return o, true
}

// dispatched tells Options.Dispatched the time from w's placement here
// to started, its start on the agent.
func (d *Dispatcher) dispatched(w *waiter, started time.Time) {
	d.mu.Lock()
	placedAt := w.placedAt
	d.mu.Unlock()
	if d.o.Dispatched == nil || placedAt.IsZero() || started.IsZero() {
		return
	}
	d.o.Dispatched(max(started.Sub(placedAt), 0))
}

// withdraw gives the assignment up as its step ended (cancel, timeout):
// a waiting one leaves the queue, a placed one is cancelled on its agent.
// A result that came meanwhile is the attempt's.
func (d *Dispatcher) withdraw(ctx context.Context, w *waiter) (outcome, error) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if o, ok := d.ended(bg, w); ok && o.lost == "" {
		return o, nil
	}
	if _, err := retryStore(bg, func() (struct{}, error) { return struct{}{}, d.store.WithdrawAgentAssignment(bg, w.id) }); err != nil {
		d.o.Logger.Warn("withdraw an agent assignment", "assignment", w.id, "err", err)
	}
	d.mu.Lock()
	session := w.session
	d.mu.Unlock()
	subjects := []string{"place"}
	if session != "" {
		subjects = append(subjects, state.AgentSessionSubject(session))
	}
	d.tell(subjects...)
	return outcome{}, context.Cause(ctx)
}
