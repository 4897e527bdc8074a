package state

import (
	"context"
	"errors"
	"time"
)

// AgentSession is one registered `runbook agent` process. Key is the
// agent's ephemeral X25519 public key (its private key never leaves its
// memory): what a replica hands the agent is sealed to it. Expires is on
// the store's clock.
type AgentSession struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Version  string            `json:"version"`
	Addr     string            `json:"addr"`
	Token    string            `json:"token,omitempty"` // the name of the token it connected with
	Labels   map[string]string `json:"labels"`
	Capacity int               `json:"capacity"`
	Key      []byte            `json:"key"`
	Draining bool              `json:"draining,omitempty"`
	// Registered is when it registered, Seen its last renewal; Expires
	// ends its lease unless renewed.
	Registered time.Time `json:"registered"`
	Seen       time.Time `json:"seen"`
	Expires    time.Time `json:"expires"`
	// Turn orders the sessions by when they were last given an
	// assignment (lower: longer ago), for placement among equals.
	Turn int64 `json:"turn"`
}

// AgentAssignment is one step attempt placed, or waiting to be placed, on
// an agent. (RunID, Step, Attempt) is its key; a step has at most one
// assignment not withdrawn, whatever its attempt: a replica that takes a
// run over and executes the step again finds the assignment the run's
// previous owner placed (AddAgentAssignment) and waits for it instead of
// placing the step again.
//
// Nothing in it is a secret in clear: the params an agent receives
// (resolved secrets, connection credentials) are Sealed to the session's
// Key by the replica that placed the attempt, and what comes back (Result,
// the mail) to the owner's OwnerKey.
type AgentAssignment struct {
	ID      string            `json:"id"`
	RunID   string            `json:"run_id"`
	Step    string            `json:"step"`
	Attempt int               `json:"attempt"`
	Type    string            `json:"type"` // the step type
	Labels  map[string]string `json:"labels"`
	// Owner is the replica executing the run, which waits for the
	// result; OwnerKey its ephemeral X25519 public key.
	Owner    string    `json:"owner"`
	OwnerKey []byte    `json:"owner_key"`
	Created  time.Time `json:"created"`
	// Session and Agent name where it was placed (empty while waiting),
	// Placed when; Sealed is what the agent receives.
	Session string    `json:"session,omitempty"`
	Agent   string    `json:"agent,omitempty"`
	Placed  time.Time `json:"placed,omitzero"`
	Sealed  []byte    `json:"sealed,omitempty"`
	// Delivered: the agent received it (a poll answered it).
	Delivered bool `json:"delivered,omitempty"`
	// Withdrawn: the owner gave it up (cancel, timeout) while placed; the
	// agent is told to stop at its next poll.
	Withdrawn bool `json:"withdrawn,omitempty"`
	// Result is the agent's result (sealed to OwnerKey); Lost names the
	// agent whose lease lapsed while it held the attempt. Either ends it.
	Result []byte `json:"result,omitempty"`
	Lost   string `json:"lost,omitempty"`
	// Resend: the owner could not open the result (sealed to the key of
	// the run's previous owner) and asks the agent for it again.
	Resend bool `json:"resend,omitempty"`
}

// AgentWork is what TakeAgentWork hands a session.
type AgentWork struct {
	Offers  []AgentAssignment // placed on it, not delivered before
	Cancels []string          // withdrawn: the agent stops them
	Resends []string          // the agent sends their result again
}

// Ended reports whether the assignment has its end: a result or a loss.
func (a AgentAssignment) Ended() bool { return a.Result != nil || a.Lost != "" }

// AgentMail is one message between replicas about an assignment: what an
// agent sent a replica other than the owner (lines, host calls), for the
// owner, or the owner's answer to a host call, for the replica that
// relayed it. To is the assignment's ID (for its owner) or a relayed
// call's ID (for its relay). Body is sealed to the recipient's key.
type AgentMail struct {
	Seq  int64  `json:"seq"`
	To   string `json:"to"`
	Body []byte `json:"body"`
}

// MaxAgentMail bounds the bytes of mail waiting for one recipient: a
// recipient that does not read (an owner stopped) holds no more than
// that, and PostAgentMail refuses what goes beyond (ErrAgentMailFull).
const MaxAgentMail = 8 << 20

var (
	// ErrAgentGone refuses what a session sends about a session or an
	// assignment the store no longer holds for it: its lease lapsed, or
	// the assignment ended or was withdrawn.
	ErrAgentGone = errors.New("the agent's session or assignment is gone")
	// ErrAgentMailFull refuses mail beyond MaxAgentMail for a recipient.
	ErrAgentMailFull = errors.New("too much agent mail waiting for its recipient")
)

// AgentStore keeps the runbook agents' sessions and the step attempts
// placed on them (internal/agent), so that any replica answers any agent
// and a replica that takes a run over finds the attempts its previous
// owner placed. Leases are on the store's clock. It is a part of Store;
// the contract suite is statetest.RunAgents.
type AgentStore interface {
	// OpenAgentSession records session s, its lease ending lease from now
	// (Registered, Seen and Expires are the store's).
	OpenAgentSession(ctx context.Context, s AgentSession, lease time.Duration) error
	// RenewAgentSession renews session id's lease to lease from now and,
	// when draining, marks it draining (it is then given nothing new).
	// ErrAgentGone when the session's lease lapsed or it was ended.
	RenewAgentSession(ctx context.Context, id string, draining bool, lease time.Duration) error
	// AgentSessions lists the sessions, expired or not until
	// ExpireAgentSessions ends them, by ID.
	AgentSessions(ctx context.Context) ([]AgentSession, error)
	// ExpireAgentSessions ends the sessions whose lease lapsed, and id's
	// whatever its lease (empty: none), marks every assignment placed on
	// them, not ended nor withdrawn, Lost (the session's agent name) and
	// deletes their withdrawn ones. It returns the assignments it marked.
	ExpireAgentSessions(ctx context.Context, id string) ([]AgentAssignment, error)

	// AddAgentAssignment records a, waiting, unless its step (run, step)
	// has an assignment not withdrawn: then that one becomes a.Owner's
	// (with a.OwnerKey) and is returned as it is, placed, ended or not.
	AddAgentAssignment(ctx context.Context, a AgentAssignment) (AgentAssignment, error)
	// AgentAssignments lists every assignment, oldest first.
	AgentAssignments(ctx context.Context) ([]AgentAssignment, error)
	// PlaceAgentAssignments places owner's waiting assignments, oldest
	// first, in one transaction that holds the sessions' rows: each on
	// the session that is live, not draining, carries every label the
	// assignment asks for and holds fewer assignments not ended than its
	// capacity; the least loaded (held / capacity), then the lowest Turn.
	// seal gives the assignment's Sealed (for the session's Key); an
	// error of seal leaves that assignment waiting. It returns those it
	// placed.
	PlaceAgentAssignments(ctx context.Context, owner string, seal func(AgentAssignment, AgentSession) ([]byte, error)) ([]AgentAssignment, error)
	// TakeAgentWork returns the assignments placed on session and not
	// delivered, which it marks delivered, the IDs of the withdrawn ones,
	// which it deletes, and those whose result is asked for again.
	TakeAgentWork(ctx context.Context, session string) (AgentWork, error)
	// AgentAssignment returns assignment id (ErrNotFound).
	AgentAssignment(ctx context.Context, id string) (AgentAssignment, error)
	// FinishAgentAssignment records the result of assignment id, sent by
	// session: ErrAgentGone unless the assignment is placed on session,
	// not ended and not withdrawn.
	FinishAgentAssignment(ctx context.Context, id, session string, result []byte) error
	// ResendAgentResult clears the result of assignment id, which its
	// owner could not open, and asks its agent for it again
	// (TakeAgentWork); ErrAgentGone when it has no result.
	ResendAgentResult(ctx context.Context, id string) error
	// WithdrawAgentAssignment gives assignment id up: a waiting or ended
	// one is deleted, a placed one is marked withdrawn (TakeAgentWork
	// then tells its agent and deletes it). None is not an error.
	WithdrawAgentAssignment(ctx context.Context, id string) error
	// DeleteAgentAssignment deletes assignment id and its mail (its owner
	// read its end). None is not an error.
	DeleteAgentAssignment(ctx context.Context, id string) error

	// PostAgentMail appends m (its Seq is the store's) and returns its
	// Seq; ErrAgentMailFull when m.To has MaxAgentMail bytes waiting.
	PostAgentMail(ctx context.Context, m AgentMail) (int64, error)
	// AgentMail returns the mail for to, in order, and deletes it.
	AgentMail(ctx context.Context, to string) ([]AgentMail, error)
}

// AgentPlacer is the placement rule of PlaceAgentAssignments, shared by
// the stores: given the sessions and the assignments not ended, it picks
// for each attempt the live session, not draining, whose labels carry the
// wanted ones and that has a free slot; the least loaded (held /
// capacity), then the lowest Turn.
type AgentPlacer struct {
	sessions []*AgentSession
	held     map[string]int
	turn     int64
}

// NewAgentPlacer returns a placer over sessions at now, held counting
// the assignments not ended nor withdrawn placed on each (HeldBySession).
func NewAgentPlacer(sessions []AgentSession, held map[string]int, now time.Time) *AgentPlacer {
	p := &AgentPlacer{held: held}
	for i := range sessions {
		s := &sessions[i]
		p.turn = max(p.turn, s.Turn)
		if !s.Draining && now.Before(s.Expires) {
			p.sessions = append(p.sessions, s)
		}
	}
	return p
}

// HeldBySession counts the assignments each session holds: placed on it,
// not ended nor withdrawn.
func HeldBySession(assignments []AgentAssignment) map[string]int {
	held := map[string]int{}
	for _, a := range assignments {
		if a.Session != "" && !a.Ended() && !a.Withdrawn {
			held[a.Session]++
		}
	}
	return held
}

// Pick returns the session for an attempt asking for labels, nil when
// none has a free slot.
func (p *AgentPlacer) Pick(labels map[string]string) *AgentSession {
	var best *AgentSession
	for _, s := range p.sessions {
		if p.held[s.ID] >= s.Capacity || !carries(s.Labels, labels) {
			continue
		}
		if best == nil {
			best = s
			continue
		}
		// Compare loads as held/capacity without division.
		l, bl := p.held[s.ID]*best.Capacity, p.held[best.ID]*s.Capacity
		if l < bl || l == bl && (s.Turn < best.Turn || s.Turn == best.Turn && s.ID < best.ID) {
			best = s
		}
	}
	return best
}

// Took counts an attempt placed on s and gives s the latest turn.
func (p *AgentPlacer) Took(s *AgentSession) {
	p.held[s.ID]++
	p.turn++
	s.Turn = p.turn
}

// carries reports whether an agent's labels carry every wanted one.
func carries(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
