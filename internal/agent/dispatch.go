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
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// DefaultLease is how long an agent keeps its session and its
// assignments without a request.
const DefaultLease = 15 * time.Second

// ErrLost answers a request of a session or about an assignment the
// store no longer holds for it: the agent's lease lapsed (it was lost,
// and its attempts went on without it), or the attempt was withdrawn
// (cancelled, timed out). The agent stops that work; a result it sends is
// refused.
var ErrLost = &fault.Error{Code: fault.Conflict, Message: "the lease on this session or assignment lapsed: it was given up"}

// Notices carries the replicas' notices (state.Coordinator's Listen and
// Notify): NoticeAgent tells the replicas what changed.
type Notices interface {
	Listen(ctx context.Context, fn func(state.Notice)) error
	Notify(ctx context.Context, n state.Notice) error
}

// Options configure a Dispatcher.
type Options struct {
	// Store keeps the sessions and assignments (required).
	Store state.AgentStore
	// Notices: the replicas sharing Store (nil: this process is the only
	// one, and tells itself).
	Notices Notices
	// Lease: DefaultLease when zero. A poll is held at most a third of it.
	Lease  time.Duration
	Logger *slog.Logger
	// Dispatched, when set, is told each attempt's dispatch latency as its
	// result is read: from its placement, as this replica committed it, to
	// its start on the agent, by the agent's clock (so the offset of the
	// two clocks counts in it; an attempt taken over from another replica
	// is not told).
	Dispatched func(time.Duration)
}

// Dispatcher is a replica's side of the agents: it answers any agent's
// requests, places the attempts of the runs_on steps this replica
// executes, and relays what comes back to them. It implements
// engine.Agents.
//
// What it tells itself and the other replicas (NoticeAgent, its Key a
// list of subjects): "s:SESSION" (work for a session: its poll wakes),
// "m:ID" and "e:ID" (mail for, or the end of, assignment ID: its owner
// wakes), "r:REQUEST" (the answer to a relayed host call), "place" (a
// slot may be free: owners with waiting attempts place them).
type Dispatcher struct {
	o     Options
	store state.AgentStore
	keys  keyPair
	owner string // this replica, as the owner of its assignments

	// placing serializes this replica's placements: one transaction at
	// a time holds a connection (others would wait on the database's
	// lock with theirs, and a pool full of them holds the polls'
	// renewals up).
	placing sync.Mutex

	mu     sync.Mutex
	waits  map[string]*waiter       // the assignments this replica waits on, by ID
	polls  map[string]chan struct{} // the sessions polling here
	relays map[string]chan struct{} // the host calls relayed from here
	place  chan struct{}
	// stopping is closed when Run returns (the server shuts down): the
	// polls held answer at once, so that they hold no shutdown up.
	stopping     chan struct{}
	stoppingOnce sync.Once
}

var _ engine.Agents = (*Dispatcher)(nil)

// NewDispatcher returns a dispatcher; its leases lapse and its notices
// are heard while Run runs.
func NewDispatcher(o Options) *Dispatcher {
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{o: o, store: o.Store, keys: newKeyPair(), owner: newID("d-"),
		waits: map[string]*waiter{}, polls: map[string]chan struct{}{}, relays: map[string]chan struct{}{},
		place: make(chan struct{}, 1), stopping: make(chan struct{})}
}

// Lease is the agents' lease.
func (d *Dispatcher) Lease() time.Duration { return d.o.Lease }

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// tell wakes what the subjects name, here and on the other replicas.
func (d *Dispatcher) tell(subjects ...string) {
	keys := state.AgentNoticeKeys(subjects)
	for _, key := range keys {
		for _, s := range strings.Fields(key) {
			d.heard(s)
		}
	}
	if d.o.Notices == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, key := range keys {
		if err := d.o.Notices.Notify(ctx, state.Notice{Kind: state.NoticeAgent, Key: key}); err != nil {
			// The others poll meanwhile (a lapse of a second at most).
			d.o.Logger.Debug("tell the replicas about agents", "err", err)
			return
		}
	}
}

// heard wakes what one subject names in this process.
func (d *Dispatcher) heard(subject string) {
	kind, id, _ := strings.Cut(subject, ":")
	d.mu.Lock()
	defer d.mu.Unlock()
	switch kind {
	case "s":
		if c := d.polls[id]; c != nil {
			signal(c)
		}
	case "m", "e":
		if w := d.waits[id]; w != nil {
			w.mail = w.mail || kind == "m"
			w.end = w.end || kind == "e"
			signal(w.wake)
		}
	case "r":
		if c := d.relays[id]; c != nil {
			signal(c)
		}
	case "place":
		signal(d.place)
	}
}

// wakeAll wakes everything waiting here (notices may have been missed).
func (d *Dispatcher) wakeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.polls {
		signal(c)
	}
	for _, w := range d.waits {
		w.mail, w.end = true, true
		signal(w.wake)
	}
	for _, c := range d.relays {
		signal(c)
	}
	signal(d.place)
}

// Register opens a session for an agent. token names the token it
// authenticated with, addr where it connects from.
func (d *Dispatcher) Register(ctx context.Context, reg api.AgentRegister, addr, token string) (api.AgentSession, error) {
	if reg.Capacity < 1 {
		return api.AgentSession{}, &fault.Error{Code: fault.Invalid, Message: "capacity must be at least 1"}
	}
	if reg.Name == "" {
		return api.AgentSession{}, &fault.Error{Code: fault.Invalid, Message: "an agent needs a name"}
	}
	if len(reg.Key) != 32 {
		return api.AgentSession{}, &fault.Error{Code: fault.Invalid, Message: "an agent registers with its X25519 public key (32 bytes): upgrade the agent to this server's version"}
	}
	for _, l := range reg.Limits {
		if err := l.Check(reg.Capacity); err != nil {
			return api.AgentSession{}, &fault.Error{Code: fault.Invalid, Message: err.Error()}
		}
	}
	s := state.AgentSession{ID: newID("s-"), Name: reg.Name, Version: reg.Version, Addr: addr, Token: token,
		Labels: maps.Clone(reg.Labels), Capacity: reg.Capacity, Limits: slices.Clone(reg.Limits), Key: reg.Key}
	if err := d.store.OpenAgentSession(ctx, s, d.o.Lease); err != nil {
		return api.AgentSession{}, err
	}
	d.tell("place")
	d.o.Logger.Info("agent registered", "agent", s.Name, "session", s.ID, "labels", s.Labels, "capacity", s.Capacity, "limits", s.Limits)
	return api.AgentSession{Session: s.ID, LeaseMS: d.o.Lease.Milliseconds(), PollMS: d.pollFor().Milliseconds()}, nil
}

func (d *Dispatcher) pollFor() time.Duration { return d.o.Lease / 3 }

// Poll renews the session's lease and answers its new assignments,
// cancels and results asked for again, waiting up to a third of the
// lease (or until ctx ends) when there are none.
func (d *Dispatcher) Poll(ctx context.Context, p api.AgentPoll) (api.AgentWork, error) {
	if err := d.store.RenewAgentSession(ctx, p.Session, p.Draining, d.o.Lease); err != nil {
		if errors.Is(err, state.ErrAgentGone) {
			return api.AgentWork{}, ErrLost
		}
		return api.AgentWork{}, err
	}
	wake := make(chan struct{}, 1)
	d.mu.Lock()
	d.polls[p.Session] = wake
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.polls[p.Session] == wake {
			delete(d.polls, p.Session)
		}
		d.mu.Unlock()
	}()
	timer := time.NewTimer(d.pollFor())
	defer timer.Stop()
	for {
		work, err := d.store.TakeAgentWork(ctx, p.Session, p.Running)
		if err != nil {
			return api.AgentWork{}, err
		}
		if len(work.Offers) > 0 || len(work.Cancels) > 0 || len(work.Resends) > 0 {
			w := api.AgentWork{Cancel: work.Cancels, Resend: work.Resends}
			for _, a := range work.Offers {
				w.Sealed = append(w.Sealed, a.Sealed)
			}
			return w, nil
		}
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

// Run, until ctx ends, hears the other replicas' notices, places this
// replica's waiting attempts, ends the sessions that made no request for
// a lease (their assignments are lost) and, each lease, gives up the
// assignments of runs that ended while no replica executed them.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.stoppingOnce.Do(func() { close(d.stopping) })
	if d.o.Notices != nil {
		go d.listen(ctx)
	}
	expire := time.NewTicker(max(d.o.Lease/10, 10*time.Millisecond))
	defer expire.Stop()
	prune := time.NewTicker(d.o.Lease)
	defer prune.Stop()
	// A missed notice of another replica costs a second at most; alone,
	// the process tells itself everything.
	fallback := time.NewTicker(time.Second)
	defer fallback.Stop()
	if d.o.Notices == nil {
		fallback.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.place:
			d.placeWaiting(ctx, nil)
		case <-fallback.C:
			d.wakeAll()
		case <-expire.C:
			d.expire(ctx)
		case <-prune.C:
			d.prune(ctx)
		}
	}
}

func (d *Dispatcher) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := d.o.Notices.Listen(ctx, func(n state.Notice) {
			switch n.Kind {
			case state.NoticeListening:
				d.wakeAll()
			case state.NoticeAgent:
				for _, s := range strings.Fields(n.Key) {
					d.heard(s)
				}
			}
		})
		if ctx.Err() != nil {
			return
		}
		d.o.Logger.Debug("not listening for the agents' notices; polling meanwhile", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (d *Dispatcher) expire(ctx context.Context) {
	lost, err := d.store.ExpireAgentSessions(ctx, "")
	if err != nil {
		d.o.Logger.Debug("end the lapsed agent sessions", "err", err)
		return
	}
	if len(lost) == 0 {
		return
	}
	subjects := []string{"place"}
	for _, a := range lost {
		d.o.Logger.Warn("agent lost", "agent", a.Lost, "session", a.Session, "run_id", a.RunID, "step", a.Step)
		subjects = append(subjects, "e:"+a.ID)
	}
	d.tell(subjects...)
}

// prune gives up the assignments of the runs recorded ended for a lease
// (an owner that executes a run learns of its end sooner), which no owner
// reads: their run ended while no replica executed it (cancelled while
// its owner was dead). Their agents are told to stop those they run.
func (d *Dispatcher) prune(ctx context.Context) {
	sessions, err := d.store.PruneAgentAssignments(ctx, d.o.Lease)
	if err != nil {
		d.o.Logger.Debug("give up the agent assignments of ended runs", "err", err)
		return
	}
	if len(sessions) == 0 {
		return
	}
	subjects := []string{"place"}
	for _, s := range sessions {
		subjects = append(subjects, state.AgentSessionSubject(s))
	}
	d.tell(subjects...)
}

// placeWaiting places this replica's waiting attempts and wakes the
// polls of the sessions they went to. With mine, it does nothing once
// mine is placed (by a placement it waited behind).
func (d *Dispatcher) placeWaiting(ctx context.Context, mine *waiter) {
	d.placing.Lock()
	defer d.placing.Unlock()
	d.mu.Lock()
	waiting := false
	for _, w := range d.waits {
		waiting = waiting || w.session == ""
	}
	done := mine != nil && mine.session != ""
	d.mu.Unlock()
	if !waiting || done {
		return
	}
	pl, err := d.store.PlaceAgentAssignments(ctx, d.owner, d.seal)
	if err != nil {
		d.o.Logger.Debug("place attempts on agents", "err", err)
		return
	}
	now := time.Now()
	var subjects []string
	d.mu.Lock()
	for _, a := range pl.Placed {
		if w := d.waits[a.ID]; w != nil {
			w.session, w.agent = a.Session, a.Agent
			w.placed, w.placedAt = true, now
			signal(w.wake)
		}
		subjects = append(subjects, state.AgentSessionSubject(a.Session))
	}
	for id, w := range d.waits {
		if why := pl.Limited[id]; w.session == "" && why != w.limited {
			w.limited = why
			if why != "" {
				signal(w.wake) // await says which limits hold it
			}
		}
	}
	d.mu.Unlock()
	// The other replicas were told with the placement's commit.
	for _, s := range subjects {
		d.heard(s)
	}
}

// seal is what the agent of session s receives of assignment a: the
// attempt as this replica resolved it, sealed to the session's key.
func (d *Dispatcher) seal(a state.AgentAssignment, s state.AgentSession) ([]byte, error) {
	d.mu.Lock()
	w := d.waits[a.ID]
	d.mu.Unlock()
	if w == nil {
		return nil, fmt.Errorf("assignment %s: not waited on here", a.ID)
	}
	wire := w.wire
	wire.ID = a.ID
	b, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	return sealTo(s.Key, b)
}

// List describes the agents' sessions, by name.
func (d *Dispatcher) List(ctx context.Context) (api.AgentList, error) {
	sessions, err := d.store.AgentSessions(ctx)
	if err != nil {
		return api.AgentList{}, err
	}
	all, err := d.store.AgentAssignments(ctx)
	if err != nil {
		return api.AgentList{}, err
	}
	running := map[string][]api.AgentRunning{}
	out := api.AgentList{Agents: []api.Agent{}}
	for _, a := range all {
		switch {
		case a.Session == "":
			out.Waiting++
		case !a.Ended() && !a.Withdrawn:
			running[a.Session] = append(running[a.Session], api.AgentRunning{Assignment: a.ID, RunID: a.RunID, Playbook: a.Playbook,
				Step: a.Step, Attempt: a.Attempt, Since: a.Created})
		}
	}
	held := state.HeldBySession(all)
	for _, s := range sessions {
		a := api.Agent{Name: s.Name, Session: s.ID, Labels: s.Labels, Capacity: s.Capacity, Limits: []api.AgentLimit{}, Version: s.Version,
			Address: s.Addr, Token: s.Token, Draining: s.Draining, RegisteredAt: s.Registered, LastHeartbeat: s.Seen, Running: running[s.ID]}
		for _, l := range s.Limits {
			a.Limits = append(a.Limits, api.AgentLimit{AgentLimit: l, Held: held.Matching(s.ID, l.Pattern)})
		}
		if a.Running == nil {
			a.Running = []api.AgentRunning{}
		}
		out.Agents = append(out.Agents, a)
	}
	sort.Slice(out.Agents, func(i, j int) bool {
		if out.Agents[i].Name != out.Agents[j].Name {
			return out.Agents[i].Name < out.Agents[j].Name
		}
		return out.Agents[i].Session < out.Agents[j].Session
	})
	return out, nil
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
