// Package steps is the step contract: the Descriptor every step type
// registers, the registry, the Call a step receives, the Host services the
// engine offers it, and the classified errors the retry policy reads.
//
// Implementations live in one folder per family (internal/steps/core,
// internal/steps/nks, ...) and register from init(); internal/steps/all
// blank-imports every family. Nothing outside a family switches on type names.
//
// Params are described by struct tags (params.go); schema.go derives the
// JSON Schema, in which every value may also be a ${{ }} expression. The
// stepstest package holds the in-memory Host and the contract suite every
// step type passes.
//
// Invariants:
//   - Register panics on an empty, malformed or duplicate type name.
//   - Params are a plain Go struct; its JSON Schema, load-time checks and
//     run-time decoding are all derived from the struct and its tags, so the
//     three never disagree.
//   - Param conversion is strict: integers accept integral float64s (JSON)
//     but no type converts from a string; null counts as absent. Durations
//     are the Duration type ("30s" or integer seconds).
//   - A step never persists anything itself; it asks the Host (Checkpoint,
//     Cursor) so that the engine owns every write and its redaction.
package steps
