package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// candidates runs the scripts' callback and returns its lines.
func (c *cli) candidates(words ...string) []string {
	c.t.Helper()
	r := c.run(append([]string{"completion", "__complete"}, words...)...)
	require.Equal(c.t, 0, r.code, r)
	return strings.Fields(r.stdout)
}

func TestCompletionOffersVerbsFlagsStepTypesAndRunIDs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	done := runIDOf(t, c.run("run", c.file("hello.yaml", helloPlaybook)).stdout)
	waiting := runIDOf(t, c.run("run", c.file("gated.yaml", approvalPlaybook)).stdout)

	t.Run("verbs, with completion itself", func(t *testing.T) {
		got := c.candidates("")
		assert.Subset(t, got, []string{"run", "runs", "validate", "serve", "completion", "help"})
	})
	t.Run("the sub-commands of runs", func(t *testing.T) {
		assert.Subset(t, c.candidates("runs", ""), []string{"list", "show", "approve", "retry", "prune"})
	})
	t.Run("the flags of a sub-command, read from its usage", func(t *testing.T) {
		got := c.candidates("runs", "prune", "--")
		assert.Subset(t, got, []string{"--older-than", "--status", "--dry-run", "--state"})
		assert.Subset(t, c.candidates("run", "-"), []string{"-i", "--sim-url", "--resume"})
	})
	t.Run("the values of --status", func(t *testing.T) {
		assert.Contains(t, c.candidates("runs", "list", "--status", ""), "failed")
	})
	t.Run("step types for call and steps", func(t *testing.T) {
		got := c.candidates("call", "")
		assert.Contains(t, got, "nks.cluster.upgrade")
		assert.Contains(t, got, "approval")
	})
	t.Run("run IDs from the state", func(t *testing.T) {
		assert.Subset(t, c.candidates("runs", "show", ""), []string{done, waiting})
		resumable := c.candidates("run", "--resume", "")
		assert.Contains(t, resumable, waiting)
		assert.NotContains(t, resumable, done, "a finished run cannot be resumed")
		other := filepath.Join(c.dir, "other.db")
		assert.Empty(t, c.candidates("runs", "show", "--state", other, ""), "a state file that does not exist offers nothing (and is not created)")
		assert.NoFileExists(t, other)
	})
	t.Run("files for a playbook argument", func(t *testing.T) {
		assert.Equal(t, []string{":files"}, c.candidates("run", ""))
	})
}

// The bash script, loaded in a real bash, completes through the binary.
func TestBashCompletionScriptCompletesThroughTheBinary(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	c := newCLI(t)
	script := c.file("runbook.bash", c.run("completion", "bash").stdout)
	complete := func(words ...string) []string {
		t.Helper()
		cmd := exec.Command(bash, "--norc", "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($#-1)); _runbook; printf '%s\n' "${COMPREPLY[@]}"`,
			"bash", script, "runbook")
		cmd.Args = append(cmd.Args, words...)
		cmd.Dir = c.dir
		cmd.Env = append(c.env, "PATH="+filepath.Dir(bin)+":/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.Fields(string(out))
	}
	assert.Equal(t, []string{"run", "runs"}, complete("ru"))
	assert.Equal(t, []string{"prune"}, complete("runs", "pr"))
	assert.Equal(t, []string{"--older-than"}, complete("runs", "prune", "--ol"))
	c.file("deploy.yaml", helloPlaybook)
	assert.Equal(t, []string{"deploy.yaml"}, complete("validate", "dep"))
}

func TestCompletionScriptsForEachShell(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for shell, want := range map[string]string{"bash": "complete -F _runbook runbook", "zsh": "compdef _runbook runbook", "fish": "complete -c runbook"} {
		r := c.run("completion", shell)
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, want, shell)
		assert.Contains(t, r.stdout, "runbook completion __complete", shell)
	}
	r := c.run("completion", "tcsh")
	assert.Equal(t, 2, r.code, r)
}
