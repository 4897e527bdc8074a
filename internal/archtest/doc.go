// Package archtest holds no code: its tests check the layering and size
// rules docs/architecture.md states, over the source tree of the module
// (imports of non-test files, file lengths, cyclomatic complexity), and
// that no step family writes to its params, which the engine shares
// between the calls of a step whose `with` is literal.
package archtest
