// Package playbook loads YAML playbooks into the typed model the engine
// runs (model.go): Load reads a file, Parse a byte slice. Loading is also
// validation: a Playbook that comes back has every step type resolved,
// every literal `with` value checked against the step's params, and every
// expression compiled against a typed environment.
//
// # Model
//
// Playbook holds the header (version, name, inputs, env, connections,
// triggers, concurrency, timeout, max_parallel), three step lists (Steps,
// OnFailure, Finally) and the playbook outputs. Every element carries the
// Pos it was written at. Step.Needs is nil when `needs:` is absent and
// non-nil (possibly empty) when given; Step.DependsOn is always resolved:
// the needs, or every earlier step of the same list. Steps without needs
// share DependsOn's backing array: treat it as read-only. Secrets lists
// every secret name an expression references, sorted. Source, Hash (hex
// SHA-256 of Source), Path and Dir (absolute) identify what was loaded.
//
// # Language decisions
//
//   - Step ids and input names match ^[a-zA-Z_][a-zA-Z0-9_]*$: no '-', as
//     ids appear in expressions as steps.<id>. Playbook names match
//     ^[a-z0-9][a-z0-9._-]{0,62}$. Ids are unique across steps, on_failure
//     and finally; needs name steps of the same list.
//   - Durations are Go durations with an optional leading whole number of
//     days: 30s, 1h30m, 2d, 1d12h (yamlnode.ParseDuration). Negative ones are
//     refused; timeouts must be above zero.
//   - Keys are strict everywhere (unknown key -> error with a did-you-mean
//     hint) except top-level keys starting with "x-", which hold YAML
//     anchors for reuse. `<<` merge keys are honoured; duplicate keys are
//     errors.
//   - An `if:` (and retry.if, webhook if) is bare or one ${{ }}; booleans
//     are accepted. for_each is a literal list or an expression.
//   - Visibility: a step's expressions see the steps it transitively
//     depends on; on_failure and finally steps also see every main step;
//     playbook outputs see every main step. Referencing a step that exists
//     but does not finish first is its own error ("does not run before").
//
// # Diagnostics
//
// An invalid playbook returns Diagnostics: every problem found, sorted by
// position, printed one per line as `file:line:col: path: message`, e.g.
//
//	upgrade.yaml:14:7: steps[2].with.node_count: must be between 1 and 10 (got 12)
//
// After a YAML syntax error there is only that one diagnostic, at the
// parser's line and column. Param problems point at the key they name (or
// the deepest part of the path that exists). Expression errors point
// inside the string: exact for plain and literal-block (|) scalars; for
// quoted scalars the column is exact unless an escape sequence comes first;
// folded (>) and multi-line flow scalars are best effort (line found by
// counting line breaks of the value).
//
// # Caps
//
// Hostile input is refused with a diagnostic: sources over
// LoadOptions.MaxBytes (DefaultMaxBytes, 1 MiB); documents expanding to
// more than MaxNodes (100,000) nodes with aliases followed (alias bombs are
// measured without being expanded) and alias cycles; nesting deeper than
// MaxDepth (64); more than MaxSteps (10,000) steps; expressions over the
// expr package's limits. Reporting stops after MaxDiagnostics (200).
//
// # Schema
//
// Schema generates the JSON Schema of playbooks from the step registry;
// schema/playbook.schema.json holds it for the built-in steps and a test
// fails when it is stale. ValidateSchema (test code only, to keep the validator out of the binary) checks a source against it.
package playbook
