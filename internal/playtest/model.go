package playtest

import (
	"regexp"
	"time"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
)

// Pos is a position in a test file (file:line:col), the type playbook
// diagnostics use.
type Pos = playbook.Pos

// File is a loaded, valid test file: the playbook it tests and its cases.
type File struct {
	Path     string
	Playbook *playbook.Playbook
	Cases    []*Case
}

// Case is one scenario: how the run starts, the world it starts in, what
// goes wrong, and what must be true at the end.
type Case struct {
	Name string
	Pos  Pos
	// Inputs, Env and Secrets are templates over `env` (the case's
	// environment: TEST_DIR, TEST_SINK, then Env itself for Inputs and
	// Secrets).
	Inputs  map[string]expr.Value
	Env     map[string]expr.Value
	EnvKeys []string // Env's keys in written order
	Secrets map[string]expr.Value
	// Files are written into the case directory before the run (the
	// playbook's directory during the run).
	Files     map[string]string
	Trigger   *Trigger
	World     World
	Faults    []Fault
	Approvals []*Approval
	Retry     *RetryFrom
	Speed     float64 // simulated seconds per real second
	Expect    Expect
}

// Trigger starts the run as a schedule or webhooks would; nil: by hand.
type Trigger struct {
	Pos      Pos
	Schedule *ScheduleFire
	Webhooks []*Delivery
}

// ScheduleFire fires the playbook's schedule trigger Index at At (zero:
// the first slot after the simulated clock's start).
type ScheduleFire struct {
	Index int
	At    time.Time
}

// Delivery is one webhook request body, delivered Times times (a
// redelivery is the same body again).
type Delivery struct {
	Pos   Pos
	Route string
	Body  expr.Value
	Times int
}

// World is the simulators' state before the run.
type World struct {
	NKS        *NKSWorld
	HelpCenter *HelpCenterWorld
	EasyMaker  *EasyMakerWorld
	Objects    []*SeedObject
}

// NKSWorld seeds the cluster simulator.
type NKSWorld struct {
	Versions  map[string]bool
	Durations map[string]time.Duration
	Clusters  []*SeedCluster
}

// SeedCluster is one cluster of NKSWorld.
type SeedCluster struct {
	Pos        Pos
	Name       string
	Version    string
	NodeCount  int
	NodeGroups []SeedNodeGroup
}

// SeedNodeGroup is a worker group of a SeedCluster.
type SeedNodeGroup struct {
	Name      string
	Version   string
	NodeCount int
}

// HelpCenterWorld replaces the generated notices.
type HelpCenterWorld struct {
	Generated int // notices generated from the seed (default 0)
	Notices   []*SeedNotice
}

// SeedNotice is one notice, dated Age before the clock's start (or At).
type SeedNotice struct {
	Pos      Pos
	Title    string
	Content  string
	Category int
	Tags     []int
	Top      bool
	Age      time.Duration
	At       time.Time
}

// EasyMakerWorld seeds the ML simulator.
type EasyMakerWorld struct {
	Experiments []string
}

// SeedObject is an object in object storage before the run.
type SeedObject struct {
	Pos  Pos
	URI  string // obs://host/v1/AUTH_tenant/container/name
	Text string
}

// Fault is one thing that goes wrong: exactly one field is set.
type Fault struct {
	Pos  Pos
	HTTP *HTTPFault
	Task *TaskFault
	Kill *Kill
}

// HTTPFault answers matching calls with Status (0: only delay them by
// Latency), Count times (0: every time).
type HTTPFault struct {
	Service    string
	Method     string
	Path       string // prefix, below the service
	Status     int
	Count      int
	Latency    time.Duration
	RetryAfter int
}

// TaskFault makes the next Times matching cluster tasks end in FAIL.
type TaskFault struct {
	Operation string
	Cluster   string
	NodeGroup string
	Contents  string
	After     int // matching tasks that succeed before the first that fails
	Times     int
}

// Kill stops the run (as a crash would) right after step After ends,
// then resumes it with a new engine over the same state.
type Kill struct {
	After string
}

// Approval answers the approval step Step when the run waits on it.
type Approval struct {
	Pos     Pos
	Step    string
	Approve bool
	By      string
	Comment string
	Fields  map[string]any
}

// RetryFrom retries a failed run from step From (`runbook runs retry`).
type RetryFrom struct {
	Pos  Pos
	From string
}

// Expect is what must hold at the end. Status, Error, Steps and Outputs
// apply to the last run of the case; Runs to each run in order.
type Expect struct {
	Pos        Pos
	Run        RunExpect
	RunCount   *Check
	Runs       []*RunExpect
	Deliveries []*Check
	Calls      []*CallExpect
	Ordered    bool
	NoCalls    []*CallMatch
	Files      []*FileExpect
	That       []*Check
}

// RunExpect is what must hold of one run.
type RunExpect struct {
	Pos     Pos
	Status  *Check
	Error   *ErrorExpect
	Steps   []*StepExpect
	Outputs []*ValueExpect
}

// StepExpect is what must hold of one step's record.
type StepExpect struct {
	Pos      Pos
	ID       string
	Status   *Check
	Attempts *Check
	Error    *ErrorExpect
	Outputs  []*ValueExpect
}

// ErrorExpect matches an error by code and by a part of its message.
type ErrorExpect struct {
	Code     *Check
	Contains *Check
}

// ValueExpect is one named value to compare.
type ValueExpect struct {
	Name string
	Want *Check
}

// Check is one expected value with its position: a literal compared to
// the actual value, or an expression (see Expect in doc.go).
type Check struct {
	Pos     Pos
	Literal any
	Expr    expr.Value // nil for a literal
	Source  string     // the expression as written
}

// CallMatch selects journaled calls.
type CallMatch struct {
	Pos          Pos
	Service      string
	Method       string
	Path         string // segments; * matches one, ** the rest
	pathRE       *regexp.Regexp
	Status       int
	Body         map[string]any // fields the JSON body must hold
	BodyContains string
}

// CallExpect is a CallMatch with the number of calls it must select
// (nil Count: at least one).
type CallExpect struct {
	CallMatch
	Count *Check
}

// FileExpect is what must hold of a file after the run.
type FileExpect struct {
	Pos         Pos
	Path        expr.Value // relative to the case directory
	Exists      *Check
	Contains    []*Check
	NotContains []*Check
	Equals      *Check
	Mode        *Check
	Lines       map[string]*Check // number of lines equal to the key
	LineKeys    []string
}
