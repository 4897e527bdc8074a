package api

import (
	"encoding/json"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// The agents' protocol (docs/agents.md): long-poll HTTP/JSON under
// /api/v1/agent/, every request from the agent. An agent registers
// (AgentRegister -> AgentSession), then polls (AgentPoll -> AgentWork),
// which also renews its lease; for each assignment it sends the lines
// printed (AgentLines), the step's host calls (AgentHostCall ->
// AgentHostAnswer) and the result (AgentResult). A request whose session
// or assignment the server no longer holds (the lease lapsed) answers 409
// with fault code "conflict": the agent stops that work.

// AgentRegister is POST /api/v1/agent/register.
type AgentRegister struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels"`
	Capacity int               `json:"capacity"`
	Version  string            `json:"version"`
	// Limits bound the attempts at once of the playbooks each selects
	// (runbook agent --limit PATTERN=N).
	Limits []state.AgentLimit `json:"limits,omitempty"`
	// Key is the agent's ephemeral X25519 public key for this session:
	// the assignments it receives are sealed to it (nacl box), so that
	// the params, which hold resolved secrets, are stored by the
	// replicas only sealed.
	Key []byte `json:"key"`
}

// AgentLimit is one of an agent's limits per playbook in GET
// /api/v1/agents, with how many attempts of the playbooks it selects the
// agent runs.
type AgentLimit struct {
	state.AgentLimit
	Held int `json:"held"`
}

// AgentSession is the answer of a registration.
type AgentSession struct {
	Session string `json:"session"`
	// LeaseMS is how long the server keeps the session and its
	// assignments without a request from the agent.
	LeaseMS int64 `json:"lease_ms"`
	// PollMS is the longest a poll is held open without work.
	PollMS int64 `json:"poll_ms"`
}

// AgentPoll is POST /api/v1/agent/poll: a heartbeat that waits for work.
type AgentPoll struct {
	Session string `json:"session"`
	// Running are the assignments the agent is executing.
	Running []string `json:"running"`
	// Draining: the agent is stopping; it takes no new assignment.
	Draining bool `json:"draining,omitempty"`
}

// AgentWork answers a poll: new assignments, the running ones to stop and
// the ended ones whose result the server asks for again (it could not
// read the one it got: the replica it was sealed for stopped). Each of
// Sealed is an AgentAssignment as JSON, sealed to the session's Key
// (nacl box, anonymous sender).
type AgentWork struct {
	Sealed [][]byte `json:"sealed"`
	Cancel []string `json:"cancel,omitempty"`
	Resend []string `json:"resend,omitempty"`
}

// AgentAssignment is one step attempt for an agent to execute.
type AgentAssignment struct {
	ID      string `json:"id"`
	RunID   string `json:"run_id"`
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
	// Type is the step type (uses); Params its decoded params as JSON,
	// Extra the `with` keys outside them.
	Type           string          `json:"type"`
	Params         json.RawMessage `json:"params,omitempty"`
	Extra          map[string]any  `json:"extra,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	Resume         []byte          `json:"resume,omitempty"`
	// Reconcile is the unresolved intent of an earlier attempt: the
	// agent calls the step type's reconcile first and adopts what it
	// finds.
	Reconcile *AgentIntent `json:"reconcile,omitempty"`
	// Secrets are the placeholders in Params and Extra that stand for the
	// agent's own secrets (`secrets: {NAME: {agent: VAR}}`), each with its
	// VAR: the agent puts the values there. No value is ever sent.
	Secrets map[string]string `json:"secrets,omitempty"`
	// TimeoutMS bounds the attempt on the agent (0: the server's cancel
	// ends it).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// AgentIntent is an intent sent for reconciliation.
type AgentIntent struct {
	Attempt        int       `json:"attempt"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
	Data           []byte    `json:"data,omitempty"`
}

// AgentLine is one printed line.
type AgentLine struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// AgentLines is POST /api/v1/agent/assignments/{id}/lines.
type AgentLines struct {
	Session string      `json:"session"`
	Lines   []AgentLine `json:"lines"`
}

// AgentHostCall is POST /api/v1/agent/assignments/{id}/host: a call of
// the step on its host that the server answers (Op "checkpoint" with
// Data, "connection" with Name, "cursor" with Name, "set_cursor" with
// Name and Data).
type AgentHostCall struct {
	Session string `json:"session"`
	Op      string `json:"op"`
	Name    string `json:"name,omitempty"`
	Data    []byte `json:"data,omitempty"`
}

// AgentHostAnswer answers a host call; Error is set when it failed.
type AgentHostAnswer struct {
	Connection map[string]any `json:"connection,omitempty"`
	Data       []byte         `json:"data,omitempty"`
	Error      *AgentError    `json:"error,omitempty"`
}

// AgentResult is POST /api/v1/agent/assignments/{id}/result.
type AgentResult struct {
	Session string         `json:"session"`
	Outputs map[string]any `json:"outputs,omitempty"`
	Error   *AgentError    `json:"error,omitempty"`
	// Reconciled says the outputs were adopted from an earlier attempt.
	Reconciled bool `json:"reconciled,omitempty"`
	// Started is when the attempt started on the agent, by its clock: the
	// server's dispatch latency is from the assignment's placement to it.
	Started time.Time `json:"started,omitzero"`
}

// AgentError is a step's error as the agent saw it.
type AgentError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// Agent is one connected agent in GET /api/v1/agents.
type Agent struct {
	Name          string            `json:"name"`
	Session       string            `json:"session"`
	Labels        map[string]string `json:"labels"`
	Capacity      int               `json:"capacity"`
	Limits        []AgentLimit      `json:"limits"`
	Running       []AgentRunning    `json:"running"`
	Version       string            `json:"version"`
	Address       string            `json:"address"`
	Token         string            `json:"token,omitempty"` // the name of the token it connected with
	Draining      bool              `json:"draining,omitempty"`
	RegisteredAt  time.Time         `json:"registered_at"`
	LastHeartbeat time.Time         `json:"last_heartbeat"`
}

// AgentRunning is an attempt an agent executes.
type AgentRunning struct {
	Assignment string    `json:"assignment"`
	RunID      string    `json:"run_id"`
	Playbook   string    `json:"playbook,omitempty"`
	Step       string    `json:"step"`
	Attempt    int       `json:"attempt"`
	Since      time.Time `json:"since"`
}

// AgentList is GET /api/v1/agents; Waiting counts the attempts waiting
// for an agent.
type AgentList struct {
	Agents  []Agent `json:"agents"`
	Waiting int     `json:"waiting"`
}
