package playbook

import (
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/steps"
)

// Pos is a position in a playbook file (1-based line and column).
type Pos struct {
	File string
	Line int
	Col  int
}

// Playbook is a loaded, validated playbook. Every expression in it is
// compiled; every step's `uses` is resolved to its descriptor.
type Playbook struct {
	Version     int
	Name        string
	Description string
	// Labels group playbooks (team: ml); a role may be limited to a label.
	Labels map[string]string
	Inputs []*Input // in the order written
	// Env is the playbook's `env:` map; values may be templates over inputs.
	Env         map[string]expr.Value
	Connections map[string]map[string]any
	Triggers    []*Trigger
	Concurrency *Concurrency
	Timeout     time.Duration
	MaxParallel int // playbook-level cap on concurrently running steps (0: default)
	// TakeOver (`take_over: true`) lets the `runbook serve` replicas on a
	// database take over a run of this playbook that `runbook run` started,
	// once that process is gone (its lease expired), as the config's
	// server.take_over_run_processes does for every playbook.
	TakeOver bool
	// RunsOn is the placement of every step that names none (runs_on,
	// on_agent_lost at the top), nil: in the engine's process.
	RunsOn    *RunsOn
	Steps     []*Step
	OnFailure []*Step
	Finally   []*Step
	// Outputs are the playbook's outputs (for sub-playbooks and `runs show`).
	Outputs map[string]expr.Value
	// Secrets lists every secret name the playbook references.
	Secrets []string
	// AgentSecrets are the secrets resolved on the agent that runs the
	// step (`secrets: {NAME: {agent: VAR}}`), by name: VAR of the agent's
	// environment or secrets file.
	AgentSecrets map[string]string

	Path   string // file it was loaded from ("" for in-memory)
	Dir    string // directory of Path, for relative paths
	Source []byte // exact bytes loaded
	Hash   string // hex SHA-256 of Source
	Pos    Pos
}

// Input is a declared input.
type Input struct {
	Name        string
	Type        string // string, integer, number, boolean, list, map
	Required    bool
	Default     any // nil if none
	HasDefault  bool
	Enum        []any
	Pattern     string
	Min, Max    *float64 // numbers: value; strings and lists: length
	Description string
	Secret      bool // masked in logs and output like a secret
	Pos         Pos
}

// Step is one step of a playbook.
type Step struct {
	ID   string
	Uses string
	Desc *steps.Descriptor
	// With is the compiled `with` map; literal values were already checked
	// against the params at load time.
	With map[string]expr.Value
	// WithKeys preserves the written order of With.
	WithKeys []string
	// Decoded is With decoded into the step's params, once at load, when
	// no value of With holds an expression (nil otherwise): every call of
	// the step is given the same params. Steps read their params and never
	// change them.
	Decoded *DecodedWith
	If      *expr.Program // nil: run when no earlier step failed
	// Needs are explicit dependencies; nil means "every earlier step" (the
	// order of writing). DependsOn is the resolved list either way.
	Needs     []string
	DependsOn []string
	ForEach   expr.Value // nil if not a loop; evaluates to a list (or map)
	// MaxParallel caps concurrent for_each items (0: 1, sequential).
	MaxParallel     int
	Retry           *Retry
	Timeout         time.Duration
	ContinueOnError bool
	// RunsOn places the step's attempts on an agent (its own runs_on, else
	// the playbook's); nil: in the engine's process.
	RunsOn  *RunsOn
	Outputs map[string]expr.Value
	Name    string // optional display name
	Pos     Pos
	// DiagPath is the step's path in diagnostics ("steps[2]").
	DiagPath string

	withNode    *yaml.Node // for ParamPos and WithNode
	forEachNode *yaml.Node // for ForEachNode
}

// DecodedWith is a literal `with` decoded: what Desc.Decode returns for
// it, or, for a step whose outputs are its `with` (OutputsFromWith), the
// map itself as Extra.
type DecodedWith struct {
	Params any
	Extra  map[string]any
}

// Retry is a step's retry policy.
type Retry struct {
	Attempts int // total attempts including the first (>= 1)
	Delay    time.Duration
	Backoff  float64 // multiplier per attempt (>= 1)
	MaxDelay time.Duration
	Jitter   bool
	// If overrides the default "retry only retryable errors" rule; it sees
	// `error` (code, message, data, attempt).
	If *expr.Program
}

// Concurrency serialises runs that share a key.
type Concurrency struct {
	Key    expr.Value // template over inputs/trigger
	OnBusy string     // queue, skip, cancel_running
	Pos    Pos
}

// Trigger is a schedule or webhook trigger. Exactly one of Schedule or
// Webhook is set.
type Trigger struct {
	Schedule *Schedule
	Webhook  *Webhook
	Inputs   map[string]expr.Value // inputs to start the run with
	Pos      Pos
}

// Schedule is a cron trigger.
type Schedule struct {
	Cron          string
	Timezone      string
	Location      *time.Location
	Overlap       string // skip, queue, allow, replace
	Catchup       string // none, latest, all
	CatchupWindow time.Duration
	Jitter        time.Duration
}

// Webhook is a webhook trigger.
type Webhook struct {
	Route  string
	Events []string      // empty: any event
	If     *expr.Program // over trigger
	Each   string        // "" or "hook"
}
