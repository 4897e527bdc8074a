// Package expr compiles and evaluates the `${{ }}` expressions of
// playbooks, on top of github.com/expr-lang/expr.
//
// See the package documentation sections below for the environment,
// the functions, the bounds and the invariants.
package expr
