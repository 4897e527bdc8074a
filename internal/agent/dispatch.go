package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
)

// DefaultLease is how long an agent keeps its session and its
// assignments without a request.
const DefaultLease = 15 * time.Second

// ErrLost answers a request of a session or about an assignment the
// dispatcher no longer holds: the agent's lease lapsed (it was lost, and
// its attempts went on without it), or the attempt was withdrawn
// (cancelled, timed out). The agent stops that work; a result it sends is
// refused.
var ErrLost = &fault.Error{Code: fault.Conflict, Message: "the lease on this session or assignment lapsed: it was given up"}

// Options configure a Dispatcher.
type Options struct {
	// Lease: DefaultLease when zero. A poll is held at most a third of it.
	Lease  time.Duration
	Logger *slog.Logger
}

// Dispatcher is the run host's side of the agents: it holds their
// sessions, places the attempts of runs_on steps on them, and relays what
// comes back. It implements engine.Agents.
type Dispatcher struct {
	o Options

	mu       sync.Mutex
	sessions map[string]*session
	byID     map[string]*assignment
	waiting  []*assignment // in arrival order
	turn     uint64        // round robin among equally loaded agents
	// stopping is closed when Run returns (the server shuts down): the
	// polls held answer at once, so that they hold no shutdown up.
	stopping     chan struct{}
	stoppingOnce sync.Once
}

var _ engine.Agents = (*Dispatcher)(nil)

// session is one registered agent process.
type session struct {
	id, name, version, addr, token string
	labels                         map[string]string
	capacity                       int
	registered, lastSeen           time.Time
	running                        map[string]*assignment // assigned to it, delivered or not
	offers                         []*assignment          // assigned, not yet delivered
	cancels                        []string
	wake                           chan struct{} // a poll waits on it
	lastTurn                       uint64
	draining                       bool // it takes no new assignment
}

// assignment is one attempt, waiting for an agent or assigned to one.
type assignment struct {
	id     string
	wire   api.AgentAssignment
	a      *engine.AgentAttempt
	labels map[string]string
	sess   *session // nil while waiting
	since  time.Time
	placed chan *session // the session it went to (once)
	done   chan outcome  // its end (once)
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

// NewDispatcher returns a dispatcher; its leases lapse while Run runs.
func NewDispatcher(o Options) *Dispatcher {
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{o: o, sessions: map[string]*session{}, byID: map[string]*assignment{}, stopping: make(chan struct{})}
}

// Lease is the agents' lease.
func (d *Dispatcher) Lease() time.Duration { return d.o.Lease }

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Register opens a session for an agent. token names the token it
// authenticated with, addr where it connects from.
func (d *Dispatcher) Register(reg api.AgentRegister, addr, token string) (api.AgentSession, error) {
	if reg.Capacity < 1 {
		return api.AgentSession{}, &fault.Error{Code: fault.Invalid, Message: "capacity must be at least 1"}
	}
	if reg.Name == "" {
		return api.AgentSession{}, &fault.Error{Code: fault.Invalid, Message: "an agent needs a name"}
	}
	now := time.Now()
	s := &session{
		id: newID("s-"), name: reg.Name, version: reg.Version, addr: addr, token: token,
		labels: maps.Clone(reg.Labels), capacity: reg.Capacity, registered: now, lastSeen: now,
		running: map[string]*assignment{}, wake: make(chan struct{}, 1),
	}
	d.mu.Lock()
	d.sessions[s.id] = s
	d.place()
	d.mu.Unlock()
	d.o.Logger.Info("agent registered", "agent", s.name, "session", s.id, "labels", s.labels, "capacity", s.capacity)
	return api.AgentSession{Session: s.id, LeaseMS: d.o.Lease.Milliseconds(), PollMS: d.pollFor().Milliseconds()}, nil
}

func (d *Dispatcher) pollFor() time.Duration { return d.o.Lease / 3 }

// Execute assigns the attempt to a matching agent with a free slot and
// waits for its result (engine.Agents). An agent lost while it runs the
// attempt: a mutating step with a reconcile is assigned again with its
// intent (the next agent reconciles before it calls anything); a step with
// on_agent_lost: retry is assigned once more; any other fails with "agent
// lost".
func (d *Dispatcher) Execute(ctx context.Context, a *engine.AgentAttempt) (steps.Outputs, error) {
	wire, err := assignmentOf(ctx, a)
	if err != nil {
		return nil, err
	}
	retried := false
	for {
		asg := d.enqueue(wire, a)
		o, err := d.await(ctx, asg)
		if err != nil || o.lost == "" {
			if o.reconciled {
				a.Call.Log.Info("adopted the result of an earlier attempt, found by reconciling on the agent")
			}
			return o.out, err
		}
		if cp := asg.lastCheckpoint(d); cp != nil {
			wire.Resume = cp // what the lost attempt recorded: the next one goes on from it
		}
		switch {
		case a.Desc.Mutating && a.Desc.Reconcile != nil:
			a.Call.Log.Warn(fmt.Sprintf("agent %s lost (no heartbeat for %s): the attempt is reconciled on an agent before anything is made again", o.lost, d.o.Lease))
			wire.Reconcile = &api.AgentIntent{Attempt: a.Call.Attempt, IdempotencyKey: a.Call.IdempotencyKey, CreatedAt: asg.since, Data: wire.Resume}
		case a.RunsOn.OnAgentLost == playbook.AgentLostRetry && !retried:
			retried = true
			a.Call.Log.Warn(fmt.Sprintf("agent %s lost (no heartbeat for %s): running the attempt once more (on_agent_lost: retry)", o.lost, d.o.Lease))
		default:
			return nil, &fault.Error{Code: fault.Failed, Message: fmt.Sprintf("agent lost: agent %s stopped answering for %s while it ran the step", o.lost, d.o.Lease),
				Data: map[string]any{"agent": o.lost}}
		}
	}
}

// await waits for the assignment's end, naming its agent once placed.
func (d *Dispatcher) await(ctx context.Context, asg *assignment) (outcome, error) {
	waitNoted := false
	wait := time.NewTimer(50 * time.Millisecond)
	defer wait.Stop()
	for {
		select {
		case s := <-asg.placed:
			waitNoted = true
			asg.a.Call.Log.Info(fmt.Sprintf("running on agent %s", s.name), "agent", s.name, "agent_session", s.id)
		case <-wait.C:
			if !waitNoted {
				waitNoted = true
				asg.a.Call.Log.Info("waiting for an agent with " + asg.a.RunsOn.String())
			}
		case o := <-asg.done:
			return o, o.err
		case <-ctx.Done():
			d.withdraw(asg)
			select {
			case o := <-asg.done: // it ended meanwhile
				return o, o.err
			default:
			}
			return outcome{}, context.Cause(ctx)
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

func (asg *assignment) lastCheckpoint(d *Dispatcher) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return asg.checkpoint
}

// enqueue adds a new assignment of wire and places what it can.
func (d *Dispatcher) enqueue(wire api.AgentAssignment, a *engine.AgentAttempt) *assignment {
	asg := &assignment{id: newID("a-"), a: a, labels: a.RunsOn.Labels, since: time.Now(),
		placed: make(chan *session, 1), done: make(chan outcome, 1)}
	wire.ID = asg.id
	asg.wire = wire
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byID[asg.id] = asg
	d.waiting = append(d.waiting, asg)
	d.place()
	return asg
}

// place assigns the waiting attempts, oldest first, each to the matching
// agent with a free slot that is the least loaded (running / capacity),
// the one that waited longest for a turn among equals. Called with mu.
func (d *Dispatcher) place() {
	kept := d.waiting[:0]
	for _, asg := range d.waiting {
		s := d.pick(asg.labels)
		if s == nil {
			kept = append(kept, asg)
			continue
		}
		d.turn++
		s.lastTurn = d.turn
		s.running[asg.id] = asg
		s.offers = append(s.offers, asg)
		asg.sess = s
		asg.placed <- s
		signal(s.wake)
	}
	clear(d.waiting[len(kept):])
	d.waiting = kept
}

func (d *Dispatcher) pick(labels map[string]string) *session {
	var best *session
	for _, s := range d.sessions {
		if s.draining || len(s.running) >= s.capacity || !matches(s.labels, labels) {
			continue
		}
		if best == nil {
			best = s
			continue
		}
		// Compare loads as running/capacity without division.
		l, bl := len(s.running)*best.capacity, len(best.running)*s.capacity
		if l < bl || l == bl && s.lastTurn < best.lastTurn {
			best = s
		}
	}
	return best
}

// matches reports whether an agent's labels carry every wanted one.
func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// withdraw gives an assignment up (its step ended: cancel, timeout): a
// waiting one leaves the queue, an assigned one is cancelled on its agent.
func (d *Dispatcher) withdraw(asg *assignment) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID[asg.id] != asg {
		return
	}
	delete(d.byID, asg.id)
	if s := asg.sess; s != nil {
		delete(s.running, asg.id)
		s.cancels = append(s.cancels, asg.id)
		signal(s.wake)
		d.place()
		return
	}
	for i, w := range d.waiting {
		if w == asg {
			d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
			break
		}
	}
}

// Poll renews the session's lease and answers its new assignments and
// cancels, waiting up to a third of the lease (or until ctx ends) when
// there are none.
func (d *Dispatcher) Poll(ctx context.Context, p api.AgentPoll) (api.AgentWork, error) {
	timer := time.NewTimer(d.pollFor())
	defer timer.Stop()
	for {
		d.mu.Lock()
		s := d.sessions[p.Session]
		if s == nil {
			d.mu.Unlock()
			return api.AgentWork{}, ErrLost
		}
		s.lastSeen = time.Now()
		s.draining = s.draining || p.Draining
		if len(s.offers) > 0 || len(s.cancels) > 0 {
			w := api.AgentWork{Cancel: s.cancels}
			for _, asg := range s.offers {
				w.Assignments = append(w.Assignments, asg.wire)
			}
			s.offers, s.cancels = nil, nil
			d.mu.Unlock()
			return w, nil
		}
		wake := s.wake
		d.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return api.AgentWork{}, nil
		case <-ctx.Done():
			return api.AgentWork{}, nil
		case <-d.stopping:
			return api.AgentWork{}, nil
		}
	}
}

// held returns the assignment id of session sess, renewing the session;
// ErrLost when either is gone. Called with mu.
func (d *Dispatcher) held(sess, id string) (*assignment, error) {
	s := d.sessions[sess]
	if s == nil {
		return nil, ErrLost
	}
	s.lastSeen = time.Now()
	asg := s.running[id]
	if asg == nil {
		return nil, ErrLost
	}
	return asg, nil
}

// Lines relays the lines an assignment printed to its step's output,
// where they are masked, capped and stored as a local step's are.
func (d *Dispatcher) Lines(id string, l api.AgentLines) error {
	d.mu.Lock()
	asg, err := d.held(l.Session, id)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	for _, ln := range l.Lines {
		asg.a.Call.Print(ln.Stream, ln.Text)
	}
	return nil
}

// Host answers a host call of an assignment's step.
func (d *Dispatcher) Host(ctx context.Context, id string, hc api.AgentHostCall) (api.AgentHostAnswer, error) {
	d.mu.Lock()
	asg, err := d.held(hc.Session, id)
	if err == nil && hc.Op == "checkpoint" {
		asg.checkpoint = hc.Data
	}
	d.mu.Unlock()
	if err != nil {
		return api.AgentHostAnswer{}, err
	}
	h := asg.a.Call.Host
	var ans api.AgentHostAnswer
	switch hc.Op {
	case "checkpoint":
		err = h.Checkpoint(ctx, hc.Data)
	case "connection":
		ans.Connection, err = h.Connection(hc.Name)
	case "cursor":
		ans.Data, err = h.Cursor(ctx, hc.Name)
	case "set_cursor":
		err = h.SetCursor(ctx, hc.Name, hc.Data)
	default:
		return ans, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("unknown host call %q", hc.Op)}
	}
	if err != nil {
		ans.Error = errorOf(err)
	}
	return ans, nil
}

// Result ends an assignment with what its agent sent. A result of a
// session or assignment no longer held is refused (ErrLost): the attempt
// went on without that agent.
func (d *Dispatcher) Result(id string, r api.AgentResult) error {
	d.mu.Lock()
	asg, err := d.held(r.Session, id)
	if err == nil {
		delete(asg.sess.running, id)
		delete(d.byID, id)
		d.place()
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	o := outcome{out: wholeNumbers(r.Outputs), reconciled: r.Reconciled}
	if r.Error != nil {
		o.err = &fault.Error{Code: fault.Code(r.Error.Code), Message: r.Error.Message, Data: wholeNumbers(r.Error.Data)}
	}
	asg.done <- o
	return nil
}

// Run ends, until ctx ends, the sessions that made no request for a
// lease: their assignments are lost.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTicker(max(d.o.Lease/10, 10*time.Millisecond))
	defer t.Stop()
	defer d.stoppingOnce.Do(func() { close(d.stopping) })
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.expire(now)
		}
	}
}

func (d *Dispatcher) expire(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, s := range d.sessions {
		if now.Sub(s.lastSeen) <= d.o.Lease {
			continue
		}
		delete(d.sessions, id)
		d.o.Logger.Warn("agent lost", "agent", s.name, "session", s.id, "running", len(s.running))
		for aid, asg := range s.running {
			delete(d.byID, aid)
			asg.done <- outcome{lost: s.name}
		}
		s.running = nil
	}
}

// List describes the connected agents, by name.
func (d *Dispatcher) List() api.AgentList {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := api.AgentList{Agents: []api.Agent{}, Waiting: len(d.waiting)}
	for _, s := range d.sessions {
		a := api.Agent{Name: s.name, Session: s.id, Labels: s.labels, Capacity: s.capacity, Version: s.version,
			Address: s.addr, Token: s.token, Draining: s.draining, RegisteredAt: s.registered, LastHeartbeat: s.lastSeen, Running: []api.AgentRunning{}}
		for _, asg := range s.running {
			a.Running = append(a.Running, api.AgentRunning{Assignment: asg.id, RunID: asg.wire.RunID, Step: asg.wire.Step, Attempt: asg.wire.Attempt, Since: asg.since})
		}
		sort.Slice(a.Running, func(i, j int) bool { return a.Running[i].Since.Before(a.Running[j].Since) })
		out.Agents = append(out.Agents, a)
	}
	sort.Slice(out.Agents, func(i, j int) bool {
		if out.Agents[i].Name != out.Agents[j].Name {
			return out.Agents[i].Name < out.Agents[j].Name
		}
		return out.Agents[i].Session < out.Agents[j].Session
	})
	return out
}

// errorOf is err as an agent sends it.
func errorOf(err error) *api.AgentError {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return &api.AgentError{Code: string(fe.Code), Message: err.Error(), Data: fe.Data}
	}
	return &api.AgentError{Code: string(fault.CodeOf(err)), Message: err.Error()}
}

// wholeNumbers turns the numbers JSON decoding made (float64 or
// json.Number) back into what a local step returns: ints when whole
// (exit_code: 0), float64 otherwise.
func wholeNumbers(m map[string]any) map[string]any {
	for k, v := range m {
		m[k] = whole(v)
	}
	return m
}

func whole(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case float64:
		if x == float64(int64(x)) && x >= -1<<53 && x <= 1<<53 {
			return int(x)
		}
	case map[string]any:
		return wholeNumbers(x)
	case []any:
		for i := range x {
			x[i] = whole(x[i])
		}
	}
	return v
}
