// Package release holds the test that make release reproduces byte for
// byte (release_soak_test.go, -tags soak: it compiles runbook eight times
// with an empty build cache, too long for the default suite).
package release
