// Package steps is the step contract: how a step type is defined and
// registered, the registry, the Call a step receives, the Host services the
// engine offers it, and how its params are described, decoded and checked.
// The coded errors a step returns live below it, in internal/fault.
//
// Implementations live in one folder per family (internal/steps/core,
// internal/steps/nks, ...) and register from init(); internal/steps/all
// blank-imports every family. Nothing outside a family switches on type names.
//
// # Defining a step type
//
// A family writes one Def[P] per type, where P is its params struct (None
// for a step without params), and registers it:
//
//	steps.Register(steps.Define(steps.Def[resizeParams]{
//		Type:    "nks.cluster.resize",
//		Summary: "...",
//		Example: map[string]any{"cluster": "prod", "nodegroup": "pool-b", "node_count": 3},
//		Run:     runResize,   // func(ctx, *Call, *resizeParams) (Outputs, error)
//		Check:   checkResize, // func(*resizeParams, dynamic) []fault.Problem
//	}))
//
// Every hook (Run, Reconcile, Check, Plan, Preflight) receives the decoded
// params as *P; Define adapts them to the untyped Descriptor the engine
// calls, so no hook asserts a type. Example is a valid `with` map as a user
// writes it; every type has one, and its family's contract test runs the
// step with it (stepstest.Contract).
//
// # Params
//
// Params are a plain Go struct whose tags carry the per-field limits
// (required, min, max, minlen, maxlen, enum, pattern, format, default,
// desc); tags.go documents each tag. From the same parsed tags come the
// JSON Schema (schema.go), in which every value may also be a ${{ }}
// expression, the load-time check of literal values (CheckLiteral) and the
// run-time decoding (Decode, decode.go). Check holds what tags cannot
// say: rules across fields, rules on map keys, and rules whose message a
// pattern would not word (a path that must stay inside the playbook
// directory, an http or https URL). The stepstest package holds the
// in-memory Host and the contract suite every step type passes.
//
// Invariants:
//   - Register panics on an empty, malformed or duplicate type name, a
//     nil Run, or Params that are not a struct; a params tag that does not
//     fit its field panics, naming the type, when the type is first decoded
//     or described (its tags are read then, not in every process's
//     initialisation; the schema test of steps/all describes every
//     built-in type).
//   - Params are a plain Go struct; its JSON Schema, load-time checks and
//     run-time decoding are all derived from the struct and its tags, so the
//     three never disagree. A limit a tag can state is in the tag.
//   - Param conversion is strict (convert.go): integers accept integral
//     float64s (JSON) but no type converts from a string; null counts as
//     absent. Durations are the Duration type ("30s" or integer seconds).
//   - A step never persists anything itself; it asks the Host (Checkpoint,
//     Cursor) so that the engine owns every write and its redaction.
package steps
