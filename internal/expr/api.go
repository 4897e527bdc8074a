package expr

// The exported types of this file are the contract the playbook loader and
// the engine use. Struct tags name the fields as expressions see them.

import "time"

// Scope is the run-time environment of an expression.
type Scope struct {
	Inputs  map[string]any
	Steps   map[string]*StepState // by step id
	Env     map[string]string     // process environment + playbook env
	Secrets map[string]string     // resolved secrets the playbook references
	Trigger map[string]any        // webhook payload / schedule info; nil for manual
	Run     RunInfo
	// Item and Index are set inside for_each (HasItem true).
	Item    any
	Index   int
	HasItem bool
	// Result is the step's raw outputs, inside a step's `outputs:` map.
	Result map[string]any
	// Error is the failed attempt's error, inside `retry.if`.
	Error *ErrorInfo
	// Failed is true once any step of the run failed (failure() true,
	// success() false); Cancelled once the run is cancelled.
	Failed    bool
	Cancelled bool
	// Now is the clock for time functions; nil means time.Now.
	Now func() time.Time
	// Secret reports whether a string read from the scope holds a secret
	// (the engine passes its Redactor's Contains). EvalDerived uses it to
	// tell which results derive from a secret; nil means that only
	// `secrets` holds secrets.
	Secret func(s string) bool
	// Hosts is the inventory hosts() reads; nil: none is known.
	Hosts HostSource
}

// StepState is what an expression sees of a step: steps.<id>.outputs|status|error.
type StepState struct {
	Outputs map[string]any `expr:"outputs" json:"outputs"`
	Status  string         `expr:"status" json:"status"` // pending, running, succeeded, failed, skipped, cancelled
	Error   *ErrorInfo     `expr:"error" json:"error"`
}

// ErrorInfo is an error as expressions see it: .code, .message, .data, .attempt.
type ErrorInfo struct {
	Code    string         `expr:"code" json:"code"`
	Message string         `expr:"message" json:"message"`
	Data    map[string]any `expr:"data" json:"data"`
	Attempt int            `expr:"attempt" json:"attempt"`
}

// RunInfo is run.id, run.playbook, run.started_at, run.status.
type RunInfo struct {
	ID        string    `expr:"id" json:"id"`
	Playbook  string    `expr:"playbook" json:"playbook"`
	StartedAt time.Time `expr:"started_at" json:"started_at"`
	Status    string    `expr:"status" json:"status"` // running until the end; finally steps see the outcome
}

// TypeEnv is what a load-time compile knows, so that a reference to an
// unknown input, step or output is a compile error.
type TypeEnv struct {
	Inputs map[string]string // input name -> type (string, integer, number, boolean, list, map)
	// Steps visible from here (they finish before the expression runs),
	// by id. Outputs nil with Open=false means the step has no outputs.
	Steps map[string]StepType
	// AllSteps are every step id of the playbook, to tell "unknown step"
	// from "step does not run before this one".
	AllSteps map[string]bool
	Item     bool // inside for_each: item and index defined
	Result   bool // inside a step's outputs: result defined
	Error    bool // inside retry.if: error defined
}

// StepType describes the outputs a step declares.
type StepType struct {
	Outputs map[string]bool
	Open    bool // any output name is accepted
	ForEach bool // outputs are {items: [...], count: n}
}

// CompileError is a compile error at a byte offset of the source string
// given to Compile or CompileTemplate (the loader turns it into line:col).
type CompileError struct {
	Offset int
	Msg    string
	err    error // ErrTooExpensive when a bound was hit
}

func (e *CompileError) Error() string { return e.Msg }

// Unwrap returns ErrTooExpensive when the error reports a bound of doc.go.
func (e *CompileError) Unwrap() error { return e.err }

// Ref is one reference an expression makes: Kind is "input", "step",
// "secret", "env", "trigger", "item"; Name the input/step/secret name;
// Output the output name for steps.<id>.outputs.<name> (else "").
type Ref struct {
	Kind, Name, Output string
}

// Value is a compiled `with`/`outputs`/`for_each` value: a literal, a
// template, or a map/list of values.
type Value interface {
	// Eval returns a native value: a whole-value template keeps the
	// expression's type; an interpolated one is a string (maps and lists
	// rendered as JSON).
	Eval(s *Scope) (any, error)
	// Literal reports whether the value contains no expression.
	Literal() bool
	// Refs lists the references of every expression inside.
	Refs() []Ref
}
