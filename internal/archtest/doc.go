// Package archtest holds no code: its tests check the layering and size
// rules docs/architecture.md states, over the source tree of the module
// (imports of non-test files, file lengths, cyclomatic complexity).
package archtest
