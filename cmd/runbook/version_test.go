package main

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// TestVersionNamesTheBuild: `runbook version` names the Go version, the
// platform and the state format the binary writes, in text and JSON. (The
// version, commit and commit date that make build stamps are checked on
// the image's binary: deploy/image.)
func TestVersionNamesTheBuild(t *testing.T) {
	c := newCLI(t)
	r := c.run("version")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^runbook \S+\n`, r.stdout)
	assert.Contains(t, r.stdout, "go:           "+runtime.Version())
	assert.Contains(t, r.stdout, "state format: "+strconv.Itoa(state.FormatVersion))
	assert.Contains(t, r.stdout, "commit:")

	r = c.run("version", "--output", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var v struct {
		Version     string `json:"version"`
		Go          string `json:"go"`
		StateFormat int    `json:"state_format"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	assert.NotEmpty(t, v.Version)
	assert.Equal(t, runtime.Version(), v.Go)
	assert.Equal(t, state.FormatVersion, v.StateFormat)
	j := c.run("version", "--json")
	require.Equal(t, 0, j.code, j.stderr)
	assert.Equal(t, r.stdout, j.stdout, "--json is --output json")

	assert.Equal(t, 2, c.run("version", "extra").code, "no arguments")
}

// TestAnUnstampedVersionSaysWhy: a binary built without VCS information
// (go run, -buildvcs=false, a git worktree) says why it knows no commit
// and how to get one, instead of a bare "unknown".
func TestAnUnstampedVersionSaysWhy(t *testing.T) {
	c := newCLI(t)
	<-plainBuilt
	require.NoError(t, plainErr, "go build -buildvcs=false")
	r := c.runCmd(exec.Command(plainBin, "version"))
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "runbook (devel)\n")
	assert.Contains(t, r.stdout, "commit:       unknown (built without VCS information: go run, -buildvcs=false, or a git worktree; go build in a clone or make build records it)\n")
}
