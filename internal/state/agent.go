package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// Limits bound the attempts it runs at once of the playbooks each
	// selects, each on its own; Capacity bounds them all.
	Limits   []AgentLimit `json:"limits,omitempty"`
	Key      []byte       `json:"key"`
	Draining bool         `json:"draining,omitempty"`
	// Registered is when it registered, Seen its last renewal; Expires
	// ends its lease unless renewed.
	Registered time.Time `json:"registered"`
	Seen       time.Time `json:"seen"`
	Expires    time.Time `json:"expires"`
	// Turn orders the sessions by when they were last given an
	// assignment (lower: longer ago), for placement among equals.
	Turn int64 `json:"turn"`
}

// AgentLimit is an agent's limit per playbook (runbook agent --limit
// PATTERN=N): it runs at most Max attempts at once of the playbooks whose
// name Pattern matches (PlaybookMatches).
type AgentLimit struct {
	Pattern string `json:"pattern"`
	Max     int    `json:"max"`
}

// String is the limit as runbook agent --limit reads it: "heavy-*=1".
func (l AgentLimit) String() string { return fmt.Sprintf("%s=%d", l.Pattern, l.Max) }

// Check reports what is wrong with l on an agent of capacity: a bad
// pattern, a bound below 1 or above the capacity.
func (l AgentLimit) Check(capacity int) error {
	switch err := CheckPlaybookPattern(l.Pattern); {
	case l.Pattern == "":
		return fmt.Errorf("limit %s: want PATTERN=N, a playbook name pattern (heavy-*) and how many attempts at once", l)
	case err != nil:
		return fmt.Errorf("limit %s: %w", l, err)
	case l.Max < 1:
		return fmt.Errorf("limit %s: at least 1 attempt at once", l)
	case l.Max > capacity:
		return fmt.Errorf("limit %s: more attempts at once than the agent's capacity (%d)", l, capacity)
	}
	return nil
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
	// Playbook is the name of the run's playbook, which the agents'
	// limits select.
	Playbook string `json:"playbook,omitempty"`
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
	// Delivered: a poll's answer carried it. Acked: its agent said it
	// has it (listed it running in a poll, or sent its result). An answer
	// lost on its way (the replica that held the poll was killed, the
	// connection broke) leaves it delivered and not acked: it is offered
	// again.
	Delivered bool `json:"delivered,omitempty"`
	Acked     bool `json:"acked,omitempty"`
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
	Offers  []AgentAssignment // placed on it, not delivered before or not acked
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
	// first, in one transaction ordered against the other placements and
	// the end of sessions, by the rule of AgentPlacer. seal gives the
	// assignment's Sealed (for the session's Key); an error of seal
	// leaves that assignment waiting. It returns those it placed, and why
	// the others wait when agents' limits hold them. A store that replicas
	// share tells them with the placement's commit, not after it: a
	// NoticeAgent naming each session placed on (AgentSessionSubject),
	// which wakes that session's poll on whichever replica holds it.
	PlaceAgentAssignments(ctx context.Context, owner string, seal AgentSealer) (AgentPlacement, error)
	// TakeAgentWork marks acked the assignments of session that running
	// (what its agent says it runs) lists, and returns the assignments
	// placed on session and not ended that were not delivered, or were
	// delivered but never acked (the answer that carried them was lost),
	// which it marks delivered; the IDs of the withdrawn ones, which it
	// deletes; and those whose result is asked for again. It may commit
	// without waiting for the disk: after a crash of the database it may
	// then hand any of them over again. An agent does not start an
	// assignment twice.
	TakeAgentWork(ctx context.Context, session string, running []string) (AgentWork, error)
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
	// PruneAgentAssignments gives up, as WithdrawAgentAssignment does,
	// the assignments not withdrawn of the runs recorded final (Done)
	// more than grace ago (or with no end time), which no owner reads any
	// more: their run ended while no replica executed it. A placed one
	// not ended is marked withdrawn (its agent stops it at its next
	// poll), the others are deleted with their mail. It returns the
	// sessions of those it marked. An assignment whose run the store does
	// not hold is left alone.
	PruneAgentAssignments(ctx context.Context, grace time.Duration) ([]string, error)

	// PostAgentMail appends m (its Seq is the store's) and returns its
	// Seq; ErrAgentMailFull when m.To has MaxAgentMail bytes waiting.
	PostAgentMail(ctx context.Context, m AgentMail) (int64, error)
	// AgentMail returns the mail for to, in order, and deletes it.
	AgentMail(ctx context.Context, to string) ([]AgentMail, error)
}

// AgentSessionSubject is the subject, in a NoticeAgent's Key, that tells
// the replicas there is work for session id. A Key holds several
// subjects, separated by spaces.
func AgentSessionSubject(id string) string { return "s:" + id }

// AgentNoticeKeys are the Keys of the NoticeAgents that carry subjects:
// each once, in order, in as few Keys as their bound (maxAgentNoticeKey
// bytes, well inside PostgreSQL's 8000 for a payload) allows.
func AgentNoticeKeys(subjects []string) []string {
	subjects = slices.Compact(slices.Sorted(slices.Values(subjects)))
	var keys []string
	for len(subjects) > 0 {
		n, size := 0, 0
		for n < len(subjects) && size+len(subjects[n])+1 <= maxAgentNoticeKey {
			size += len(subjects[n]) + 1
			n++
		}
		n = max(n, 1)
		keys = append(keys, strings.Join(subjects[:n], " "))
		subjects = subjects[n:]
	}
	return keys
}

const maxAgentNoticeKey = 4000

// AgentSealer seals assignment a for the agent of session s.
type AgentSealer func(a AgentAssignment, s AgentSession) ([]byte, error)

// AgentPlacement is what PlaceAgentAssignments did: the assignments it
// placed (Session, Agent, Placed and Sealed set), and, by ID, why some it
// left waiting wait: agents that would take them are at a limit of
// theirs ("bastion-1 (heavy-*=1)").
type AgentPlacement struct {
	Placed  []AgentAssignment
	Limited map[string]string
}

// AgentHolds counts the attempts each session holds (placed on it, not
// ended nor withdrawn), by session and playbook.
type AgentHolds map[string]map[string]int

// HeldBySession counts the attempts each session holds.
func HeldBySession(assignments []AgentAssignment) AgentHolds {
	h := AgentHolds{}
	for _, a := range assignments {
		if a.Session != "" && !a.Ended() && !a.Withdrawn {
			h.Add(a.Session, a.Playbook, 1)
		}
	}
	return h
}

// Add counts n attempts of playbook on session.
func (h AgentHolds) Add(session, playbook string, n int) {
	if h[session] == nil {
		h[session] = map[string]int{}
	}
	h[session][playbook] += n
}

// Total is how many attempts session holds.
func (h AgentHolds) Total(session string) int {
	n := 0
	for _, c := range h[session] {
		n += c
	}
	return n
}

// Matching is how many attempts session holds of the playbooks pattern
// matches.
func (h AgentHolds) Matching(session, pattern string) int {
	n := 0
	for pb, c := range h[session] {
		if PlaybookMatches(pattern, pb) {
			n += c
		}
	}
	return n
}

// AgentPlacer is the placement rule of PlaceAgentAssignments, shared by
// the stores: given the sessions and what each holds, it picks for each
// attempt the live session, not draining, whose labels carry the wanted
// ones, that has a free slot and whose limits that select the attempt's
// playbook are not reached; the least loaded (held / capacity), then the
// lowest Turn.
type AgentPlacer struct {
	sessions []*AgentSession
	held     AgentHolds
	total    map[string]int
	turn     int64
	took     map[string]*AgentSession
}

// NewAgentPlacer returns a placer over sessions at now, held counting
// what each holds (HeldBySession).
func NewAgentPlacer(sessions []AgentSession, held AgentHolds, now time.Time) *AgentPlacer {
	if held == nil {
		held = AgentHolds{}
	}
	p := &AgentPlacer{held: held, total: map[string]int{}, took: map[string]*AgentSession{}}
	for i := range sessions {
		s := &sessions[i]
		p.turn = max(p.turn, s.Turn)
		if !s.Draining && now.Before(s.Expires) {
			p.sessions = append(p.sessions, s)
			p.total[s.ID] = held.Total(s.ID)
		}
	}
	return p
}

// Pick returns the session for an attempt of playbook asking for labels,
// nil when none has a free slot.
func (p *AgentPlacer) Pick(labels map[string]string, playbook string) *AgentSession {
	var best *AgentSession
	for _, s := range p.sessions {
		if p.total[s.ID] >= s.Capacity || !carries(s.Labels, labels) || p.limitReached(s, playbook) != nil {
			continue
		}
		if best == nil {
			best = s
			continue
		}
		// Compare loads as held/capacity without division.
		l, bl := p.total[s.ID]*best.Capacity, p.total[best.ID]*s.Capacity
		if l < bl || l == bl && (s.Turn < best.Turn || s.Turn == best.Turn && s.ID < best.ID) {
			best = s
		}
	}
	return best
}

// limitReached returns the first of s's limits that selects playbook and
// that s holds as many attempts of as it allows, nil when none.
func (p *AgentPlacer) limitReached(s *AgentSession, playbook string) *AgentLimit {
	for i, l := range s.Limits {
		if PlaybookMatches(l.Pattern, playbook) && p.held.Matching(s.ID, l.Pattern) >= l.Max {
			return &s.Limits[i]
		}
	}
	return nil
}

// Limited says, when Pick found no session for the attempt, which of the
// sessions that would take it are at a limit of theirs: "bastion-1
// (heavy-*=1)", comma separated; "" when none is (no session carries the
// labels, or those that do are full).
func (p *AgentPlacer) Limited(labels map[string]string, playbook string) string {
	var out []string
	for _, s := range p.sessions {
		if p.total[s.ID] >= s.Capacity || !carries(s.Labels, labels) {
			continue
		}
		if l := p.limitReached(s, playbook); l != nil {
			out = append(out, fmt.Sprintf("%s (%s)", s.Name, l))
		}
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ", ")
}

// Took counts an attempt of playbook placed on s and gives s the latest
// turn.
func (p *AgentPlacer) Took(s *AgentSession, playbook string) {
	p.held.Add(s.ID, playbook, 1)
	p.total[s.ID]++
	p.turn++
	s.Turn = p.turn
	p.took[s.ID] = s
}

// Place places the waiting assignments, in their order, each on the
// session Pick returns, sealed by seal at now (an error of seal leaves
// it waiting). The store then records the placed assignments and the
// turns of the sessions that took them (Took).
func (p *AgentPlacer) Place(waiting []AgentAssignment, now time.Time, seal AgentSealer) AgentPlacement {
	var out AgentPlacement
	for _, a := range waiting {
		sess := p.Pick(a.Labels, a.Playbook)
		if sess == nil {
			out.wait(a, p.Limited(a.Labels, a.Playbook))
			continue
		}
		sealed, err := seal(a, *sess)
		if err != nil {
			continue
		}
		p.Took(sess, a.Playbook)
		a.Session, a.Agent, a.Placed, a.Sealed = sess.ID, sess.Name, now, sealed
		out.Placed = append(out.Placed, a)
	}
	return out
}

// Waiting is, without placing anything, what Place would leave waiting
// for the agents' limits, and whether it would place any of waiting: a
// store that writes only when there is something to place reads it
// first.
func (p *AgentPlacer) Waiting(waiting []AgentAssignment) (AgentPlacement, bool) {
	var out AgentPlacement
	for _, a := range waiting {
		if p.Pick(a.Labels, a.Playbook) != nil {
			return AgentPlacement{}, true
		}
		out.wait(a, p.Limited(a.Labels, a.Playbook))
	}
	return out, false
}

func (pl *AgentPlacement) wait(a AgentAssignment, limited string) {
	if limited == "" {
		return
	}
	if pl.Limited == nil {
		pl.Limited = map[string]string{}
	}
	pl.Limited[a.ID] = limited
}

// Turned returns the sessions that took an attempt (Took), with their
// new Turn, by ID.
func (p *AgentPlacer) Turned() []AgentSession {
	out := make([]AgentSession, 0, len(p.took))
	for _, id := range slices.Sorted(maps.Keys(p.took)) {
		out = append(out, *p.took[id])
	}
	return out
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
