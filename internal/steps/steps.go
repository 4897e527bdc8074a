package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// Outputs is what a step returns: named values, JSON-compatible.
type Outputs = map[string]any

// RunFunc performs a step.
type RunFunc func(ctx context.Context, c *Call) (Outputs, error)

// ReconcileFunc is called on resume for a mutating step whose intent was
// persisted but whose result was not. It looks for the resource the earlier
// attempt may have created (by name, idempotency key, ...). found=true adopts
// out as the step's result; found=false lets the engine run the step again.
type ReconcileFunc func(ctx context.Context, c *Call, in Intent) (out Outputs, found bool, err error)

// CheckFunc validates relations between params (beyond per-field tags).
// dynamic holds the JSON names of top-level fields whose values come from
// expressions and are therefore unknown at load time, and the paths of such
// values nested in literal lists and objects ("dataset_list[0].dataUri",
// "metric_list[2]", "tag_list[1]" for a whole element): a check must skip
// any rule that involves one of them. At run time dynamic is empty.
type CheckFunc func(params any, dynamic map[string]bool) []fault.Problem

// PreflightFunc checks literal params against the live service before a
// run starts (a version against the versions the API supports): limits no
// offline check can know. It may read through host.Connection only.
// Fields named in dynamic come from expressions and must be skipped; their
// values are checked again by the step itself before its call.
type PreflightFunc func(ctx context.Context, host Host, params any, dynamic map[string]bool) []fault.Problem

// PlanFunc describes the API calls a step would make with these params, for
// `runbook plan`. Steps that call no API leave it nil.
type PlanFunc func(params any) []PlannedCall

// Output documents one output of a step type.
type Output struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // string, integer, number, boolean, list, map, any
	Description string `json:"description"`
}

// Descriptor is everything about one step type. One Register call per type.
type Descriptor struct {
	// Type is the name used in `uses:`: family.resource.action, lower case,
	// dot separated (e.g. "log", "http.request", "nks.cluster.create").
	Type    string
	Summary string
	// Package is the import path of the package that defines the type
	// (".../internal/steps/core"); its last element names the family.
	// Register fills it, when empty, from the params type or else the Run
	// function; Define fills it from the typed hooks its adapters hide.
	Package string
	// Params is a zero value of the params struct (not a pointer), or nil
	// for a step without params. Field tags (see tags.go): json, required,
	// min, max, minlen, maxlen, enum, pattern, format, default, desc.
	Params any
	// Example is a valid `with` map (see Def.Example).
	Example map[string]any
	// Outputs lists the outputs the step always sets.
	Outputs []Output
	// OpenOutputs means outputs beyond Outputs exist and are only known at
	// run time (an expression may reference any name).
	OpenOutputs bool
	// SecretOutputs name outputs that hold credentials (a kubeconfig, a
	// token): the engine registers their values as secrets, so they are
	// masked in the state file, logs and output, and later steps see ***.
	SecretOutputs []string
	// OutputsFromWith means the step's outputs are the keys of its `with`
	// map (the `set` step).
	OutputsFromWith bool
	// OpenParams accepts keys in `with` that the params struct does not
	// declare; they reach the step in Call.Extra.
	OpenParams bool
	// Mutating steps get an intent persisted before Run and are reconciled
	// on resume.
	Mutating bool
	// Pure steps have no effect outside the run (set, log): the engine may
	// persist their completion lazily, with the next write. A crash before
	// that write runs them again on resume, which changes nothing.
	Pure bool
	// Idempotent steps act on this machine and running them again changes
	// nothing more (file.line makes sure a line is present): the engine
	// keeps their records for the run's next write, as a pure step's,
	// unless an attempt runs for engine.ShownAfter or waits to be tried
	// again (then it is put on record at once). A crash before that write
	// runs them again on resume: the effect is the same, an output may
	// differ (file.line's added is false the second time).
	Idempotent bool
	// Scripts name the params whose text an interpreter runs. The
	// playbook loader keeps every ${{ }} in them out of the script text
	// (see Script).
	Scripts   []Script
	Run       RunFunc
	Reconcile ReconcileFunc
	Check     CheckFunc
	Plan      PlanFunc
	Preflight PreflightFunc

	params reflect.Type   // struct type of Params, nil if none
	fields func() []field // decoded from the struct tags on first use, nil if no Params
}

// paramFields are the params' fields, decoded from their tags the first
// time a step of this type is decoded or described: a process that never
// loads a playbook (runbook version) does not parse every type's tags.
// A malformed tag panics then, naming the type.
func (d *Descriptor) paramFields() []field {
	if d.fields == nil {
		return nil
	}
	return d.fields()
}

// Script is a param whose string a shell runs (shell's command, a node's
// user script); Param is its key, dotted when nested ("labels.user_script").
// An expression's value must never become script text: the playbook
// loader replaces each ${{ }} in it by a reference to a variable
// ("${RB_INPUTS_WHO}", quoted as its place in the script needs) and sets
// the variable to the expression's value: in the map param Env, or, when
// Env is "" (the script runs elsewhere, without an environment of ours),
// by an assignment at the script's top, the value quoted as one word.
// What cannot be kept working that way (an expression standing for the
// whole script, or inside arithmetic) is a load error that ends with
// Instead, the way to write it.
//
// NoVariables marks a language that reads no variable runbook could set (a
// Go template): each ${{ }} in it is a load error ending with Instead.
type Script struct {
	Param       string
	Env         string
	Instead     string
	NoVariables bool
}

// PlannedCall is one API call a run would make.
type PlannedCall struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Body   any    `json:"body,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Intent is persisted before a mutating call.
type Intent struct {
	RunID          string    `json:"run_id"`
	Step           string    `json:"step"`
	Attempt        int       `json:"attempt"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
	// Data is what the step chose to record with the intent (Call.Checkpoint
	// before the call), e.g. the name of the resource being created.
	Data []byte `json:"data,omitempty"`
}

// Call is what a step receives for one attempt.
type Call struct {
	RunID   string
	StepID  string // includes the item index for for_each items: "upgrade[2]"
	Attempt int    // 1-based
	// Params is a pointer to the decoded params struct (nil if none).
	Params any
	// Extra holds `with` keys not in the params struct (OpenParams only),
	// or the whole `with` map for OutputsFromWith steps.
	Extra map[string]any
	// IdempotencyKey is stable across attempts and resumes of this step.
	IdempotencyKey string
	// Resume is the last checkpoint this step saved (across attempts and
	// processes), or nil.
	Resume []byte
	// Dir is the directory of the playbook file; relative paths resolve
	// against it.
	Dir  string
	Log  *slog.Logger
	Now  func() time.Time
	Host Host
	// Output receives what the step prints (Print, OutputWriter); nil
	// drops it.
	Output OutputSink
}

// Host is what the engine offers a running step. Interfaces live with their
// consumer: this one is consumed by steps and implemented by the engine.
type Host interface {
	// Checkpoint persists progress (what a wait waits on, its deadline, a
	// digest identity, ...). The next attempt or a resumed process gets it
	// back in Call.Resume. The engine redacts secrets before writing.
	Checkpoint(ctx context.Context, data []byte) error
	// Cursor and SetCursor read and write a named cursor that outlives runs
	// (a digest's last seen notice). Keys are chosen by the step.
	Cursor(ctx context.Context, key string) ([]byte, error)
	SetCursor(ctx context.Context, key string, val []byte) error
	// Connection returns the resolved settings of a named connection
	// (service defaults, config file, playbook override).
	Connection(name string) (map[string]any, error)
	// Secret resolves a secret by name (environment or secrets file).
	Secret(name string) (string, bool)
	// RunPlaybook runs a sub-playbook (path relative to Call.Dir) as a child
	// run and returns its outputs. Resuming the parent resumes the child.
	RunPlaybook(ctx context.Context, path string, inputs map[string]any) (Outputs, error)
	// AwaitApproval blocks until the approval is answered, it times out, or
	// ctx ends. A host that cannot wait in-process returns ErrSuspended: the
	// run is parked durably and continues when answered.
	AwaitApproval(ctx context.Context, req ApprovalRequest) (ApprovalResponse, error)
	// Mask returns s with every secret value, and every value derived
	// from one, masked as the run's logs mask them: for a step that sends
	// text it composed out of its params somewhere the engine does not
	// redact (a notification).
	Mask(s string) string
}

// ApprovalRequest describes an approval a run waits for.
type ApprovalRequest struct {
	Message   string           `json:"message"`
	Approvers []string         `json:"approvers,omitempty"`
	Fields    map[string]Field `json:"fields,omitempty"`
	Deadline  time.Time        `json:"deadline,omitzero"`
	// Required is how many distinct approvers must approve (0: 1);
	// AllowSelfApproval lets whoever started the run approve it.
	Required          int  `json:"required,omitempty"`
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
}

// Field is a typed response field of an approval.
type Field struct {
	Type     string `json:"type"` // string, integer, number, boolean
	Required bool   `json:"required,omitempty"`
	Default  any    `json:"default,omitempty"`
}

// ApprovalResponse is the answer to an approval.
type ApprovalResponse struct {
	Approved bool           `json:"approved"`
	By       string         `json:"by,omitempty"`
	Comment  string         `json:"comment,omitempty"`
	Fields   map[string]any `json:"fields,omitempty"`
	At       time.Time      `json:"at"`
	// Roles are the (last) answerer's roles; Approvers lists everyone
	// who approved, in order.
	Roles     []string `json:"roles,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
}

var (
	regMu    sync.RWMutex
	registry = map[string]*Descriptor{}
)

// typeName reports whether s is a step type's name: dot-separated words,
// each a lower-case letter, then lower-case letters, digits and
// underscores. It is not a regular expression because every process
// registers the step types at start.
func typeName(s string) bool {
	for w := range strings.SplitSeq(s, ".") {
		if w == "" || w[0] < 'a' || w[0] > 'z' {
			return false
		}
		for _, c := range []byte(w[1:]) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Register adds a step type. It panics on an empty, malformed or duplicate
// name, a missing Run, or a params struct whose tags do not parse.
func Register(d Descriptor) {
	if !typeName(d.Type) {
		panic(fmt.Sprintf("steps: invalid step type name %q", d.Type))
	}
	if d.Run == nil {
		panic(fmt.Sprintf("steps: %s: Run is nil", d.Type))
	}
	if d.Package == "" {
		d.Package = definingPackage(d.Params, d.Run)
	}
	if d.Params != nil {
		t := reflect.TypeOf(d.Params)
		if t.Kind() != reflect.Struct {
			panic(fmt.Sprintf("steps: %s: Params must be a struct value, got %s", d.Type, t))
		}
		name := d.Type
		d.params = t
		d.fields = sync.OnceValue(func() []field {
			fs, err := fieldsOf(t)
			if err != nil {
				panic(fmt.Sprintf("steps: %s: %v", name, err))
			}
			return fs
		})
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[d.Type]; dup {
		panic(fmt.Sprintf("steps: duplicate step type %q", d.Type))
	}
	registry[d.Type] = &d
}

// Lookup returns the descriptor of a registered type.
func Lookup(name string) (*Descriptor, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	d, ok := registry[name]
	return d, ok
}

// All returns every registered descriptor sorted by type name.
func All() []*Descriptor {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]*Descriptor, 0, len(registry))
	for _, d := range registry {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// Names returns every registered type name, sorted.
func Names() []string {
	all := All()
	out := make([]string, len(all))
	for i, d := range all {
		out[i] = d.Type
	}
	return out
}

// LoadCheckpoint decodes the step's last checkpoint (Call.Resume, JSON)
// into v. It reports false, leaving v alone, when there is none.
func (c *Call) LoadCheckpoint(v any) (bool, error) {
	if len(c.Resume) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(c.Resume, v); err != nil {
		return false, fmt.Errorf("%s: read checkpoint: %w", c.StepID, err)
	}
	return true, nil
}

// SaveCheckpoint persists v (as JSON) as the step's checkpoint: the next
// attempt or a resumed process finds it in Call.Resume.
func (c *Call) SaveCheckpoint(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: encode checkpoint: %w", c.StepID, err)
	}
	return c.Host.Checkpoint(ctx, b)
}

// definingPackage is the import path of the package that defines a step
// type: that of its params type, or else that of its run function.
func definingPackage(params, run any) string {
	if params != nil {
		if pkg := reflect.TypeOf(params).PkgPath(); pkg != "" {
			return pkg
		}
	}
	v := reflect.ValueOf(run)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	fn := runtime.FuncForPC(v.Pointer())
	if fn == nil {
		return ""
	}
	// github.com/x/y/internal/steps/core.runSet, or .../core.init.func1
	name := fn.Name()
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return ""
	}
	return name[:slash+1+dot]
}
