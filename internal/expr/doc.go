// Package expr compiles and evaluates the `${{ }}` expressions of
// playbooks. The language is expr-lang (github.com/expr-lang/expr):
// operators, ternaries, `??`, `in`, `startsWith`, `contains`, `matches`,
// closures (`map(list, .name)`, `filter(list, # > 1)`), `let`, and its
// builtins, plus the functions and environment below.
//
// # Templates
//
// CompileTemplate compiles a YAML string value:
//
//   - without `${{` it is a literal Value;
//   - exactly one `${{ expr }}` and nothing outside it is a whole-value
//     template: Eval returns the native value (int, float64, bool, string,
//     []any, map[string]any, time.Time, time.Duration or nil);
//   - anything else interpolates to a string: nil renders empty, floats
//     without trailing zeros (3, 2.5), times in RFC 3339, durations like
//     1h30m0s, lists and maps as compact JSON with sorted keys.
//
// `$${{` writes a literal `${{` (and is the only escape). The end of a part
// is the first `}}` outside string literals and outside balanced braces, so
// `${{ "a}}b" }}` and `${{ {"a": {"b": 1}} }}` work. Literal, Map and List
// build composite Values; Map and List evaluate their elements.
//
// Compile compiles one bare expression (an `if:`) or a single whole
// `${{ }}`. A program is compiled once; Eval never recompiles and is safe
// for concurrent use.
//
// # Environment
//
//	inputs.<name>                      playbook inputs
//	steps.<id>.outputs.<name>          outputs of an earlier step; for_each steps
//	                                   have outputs.items (per-item outputs) and .count
//	steps.<id>.status                  pending, running, succeeded, failed, skipped, cancelled
//	steps.<id>.error.code|message|data|attempt
//	env.<NAME>, secrets.<name>         strings; nil when missing
//	trigger.<key>                      webhook payload or schedule info
//	run.id|playbook|started_at|status
//	item, index                        inside for_each only
//	result                             inside a step's outputs only
//	error.code|message|data|attempt    inside retry.if only
//	success() failure() always() cancelled()
//
// Member access is nil-safe: a missing map key, or any key of a nil value,
// evaluates to nil, so `inputs.version ?? steps.supports.outputs.latest`
// works. A list index out of range is an error.
//
// # Reference checks
//
// With a TypeEnv, compiling rejects, as a CompileError at the byte offset
// of the offending name in the string given to Compile or CompileTemplate:
// unknown root names and functions, unknown inputs, unknown steps (with a
// did-you-mean suggestion), steps that do not run before this one, step
// fields other than outputs/status/error, undeclared outputs of a step
// that is not Open, and item/index/result/error outside their context.
// Both `steps.x.outputs.y` and `steps["x"].outputs["y"]` are checked; a
// dynamic index (`secrets[inputs.name]`) is allowed and reported as a Ref
// with an empty Name, meaning the whole namespace. A nil TypeEnv checks
// syntax and functions only. Refs lists input, step, secret, env, trigger
// and item references; UsesStatusFunc reports a status function call.
//
// # Taint
//
// EvalDerived (and Program.EvalDerived) evaluate like Eval and also return
// the strings of the result that derive from a secret: every string leaf
// and map key of the result of an expression that reads `secrets`, or
// reads a scope value in which Scope.Secret finds a secret (a secret
// input, an env value or for_each item computed from a secret, a step's
// result holding a secret output). Taint is decided by what an expression
// reads, so it goes through every function, slice, operator and closure;
// strings written as literals in the expression are left out. Map and
// List values taint element by element, templates part by part. The
// engine registers what it returns with its Redactor before the value is
// stored, logged or returned.
//
// # Functions
//
// Besides expr-lang's builtins (len, abs, ceil, floor, round, int, float,
// trim, trimPrefix, trimSuffix, split, splitAfter, upper, lower, indexOf,
// hasPrefix, hasSuffix, max, min, sum, mean, median, first, last, take,
// keys, values, toPairs, fromPairs, sort, sortBy, groupBy, uniq, reverse,
// fromJSON, toBase64, fromBase64, duration, date, timezone, all, any, none,
// one, filter, map, find, count, reduce, ...):
//
//	now()                         the scope clock (Scope.Now)
//	parseTime(s [, layout])       RFC 3339 or 2006-01-02 without layout
//	formatTime(t, layout)         Go layout; t a time or an RFC 3339 string
//	addDuration(t, d)             d a duration or a string like "1h30m"
//	since(t)                      now() - t
//	unix(t)                       seconds since the epoch
//	toJSON(v)                     compact JSON, sorted keys (replaces the builtin)
//	string(v)                     as interpolation renders v (replaces the builtin)
//	default(v, d)                 d when v is nil or ""
//	coalesce(a, b, ...)           the first that is not nil or ""
//	semverCompare(a, b)           -1, 0, 1 per semver.org; leading v allowed
//	semverSatisfies(v, c)         >=1.2.3, >1, <2, <=1.4, =1.2.3, !=1.2.3,
//	                              ~1.2 (>=1.2.0 <1.3.0), ^1.2.3 (<2.0.0),
//	                              ^0.2.3 (<0.3.0), 1.2 or 1.2.x; comma or space
//	                              means AND, || means OR
//	cidrContains(cidr, ipOrCidr)  cidrOverlaps(a, b)  cidrPrefix(cidr) (int)
//	cidrHost(cidr, n)             n-th address; negative counts from the end
//	replace(s, old, new)          join(list [, sep])   repeat(s, n)
//	format(fmt, args...)          fmt.Sprintf with verbs s v d f g e q x X t,
//	                              widths and precisions up to 64, no '*'
//	truncate(s, n)                the first n runes
//	slug(s)                       lower-case ASCII letters and digits joined by '-'
//	sha256(s)                     hex digest
//	base64Encode(s) base64Decode(s) urlEncode(s)
//	concat(lists...) flatten(list)
//
// replace, join, repeat, toJSON, string, concat and flatten replace the
// expr-lang builtins of the same name with bounded implementations of the
// same meaning; keys, values, toPairs, fromPairs, split, splitAfter, upper,
// lower, toBase64, fromBase64, fromJSON, sort, uniq and reverse are the
// builtins with their results measured. The builtin now() is replaced by
// the scope clock. startsWith, endsWith and contains are operators, not
// functions (`s startsWith "v"`).
//
// # Bounds
//
// Expressions come from playbooks that may be hostile. Every bound error
// wraps ErrTooExpensive and reads "expression too expensive: ...".
//
//   - Source: MaxExprLen (4 KiB) per expression, MaxTemplateLen (64 KiB)
//     and MaxTemplateParts (128) per template, MaxNodes (1000) syntax nodes.
//   - CPU: every closure body is rewritten to count an iteration; one
//     evaluation may run MaxIterations (1e6, about 0.2 s) in all. Nested
//     closures over literal ranges and arrays are estimated at compile time
//     (size of collection x cost of body) and refused over the same limit,
//     so `reduce(1..100000, reduce(1..100000, #acc + 1, 0), 0)` never runs.
//   - Memory: the expr-lang VM MemoryBudget (1e6 units, ranges, arrays and
//     maps); strings and lists built by `+`, the functions above and the
//     measured builtins count against MaxOutputBytes (4 MiB) per
//     evaluation, as does rendering the result (so a list that shares
//     sub-lists and would expand to exabytes fails fast).
//
// # Invariants
//
//   - A Program is immutable after Compile; Eval builds no map: it binds
//     the Scope to a pooled struct the program was compiled against.
//   - Names beginning with "__" are internal (the evaluation state and the
//     rewritten functions) and cannot be written in an expression.
//   - Eval does not modify the Scope; values it returns are copies of the
//     lists and maps the expression produced, except Literal values, which
//     are returned as given.
package expr
