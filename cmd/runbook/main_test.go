package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// Tests of the CLI alone (its files, a bbolt file, a database of their
// own, no replica or lease timing) call t.Parallel: they run two at a
// time once the others are done, which keeps this package, the suite's
// longest, well inside go test's 10-minute default. Tests that kill,
// stop or time replicas, leases and processes stay sequential.

// bin is the real runbook binary, built once for every test.
var bin string

// plainBin is the same binary built without VCS information
// (TestAnUnstampedVersionSaysWhy), built beside bin: one more build after
// it took 20 s on a quiet machine and 80 s at load average 30, in the
// package whose tests are the suite's longest. plainBuilt is closed once
// it is built, plainErr saying how that went.
var (
	plainBin   string
	plainBuilt = make(chan struct{})
	plainErr   error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runbook-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, plainBin = filepath.Join(dir, "runbook"), filepath.Join(dir, "runbook-plain")
	go func() {
		defer close(plainBuilt)
		out, err := exec.Command("go", "build", "-buildvcs=false", "-o", plainBin, ".").CombinedOutput()
		if err != nil {
			plainErr = fmt.Errorf("%w: %s", err, out)
		}
	}()
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build runbook:", err)
		<-plainBuilt
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := pgtest.Main(m) // stops the PostgreSQL server a test started
	<-plainBuilt
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs the binary with a private home, state file and environment.
type cli struct {
	t     *testing.T
	dir   string
	state string
	env   []string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	dir := t.TempDir()
	return &cli{
		t: t, dir: dir, state: filepath.Join(dir, "state", "state.db"),
		env: []string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + dir,
			"USER=tester",
			"TERM=dumb",
			"RUNBOOK_STATE=" + filepath.Join(dir, "state", "state.db"),
		},
	}
}

// file writes a file in the test directory and returns its path.
func (c *cli) file(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	require.NoError(c.t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run runs `runbook args...` and waits for it.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runCmd(exec.Command(bin, args...))
}

// runCmd runs cmd (the binary, or a shell that execs it) as run does.
func (c *cli) runCmd(cmd *exec.Cmd) result {
	c.t.Helper()
	args := cmd.Args[1:]
	cmd.Dir = c.dir
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("run %v: %v", args, err)
	}
	return r
}

// runID extracts the run ID from output like "run 20261122T101500-3f9a2c ...".
var runIDRe = regexp.MustCompile(`run (\d{8}T\d{6}-[0-9a-f]{6})`)

func runIDOf(t *testing.T, s string) string {
	t.Helper()
	m := runIDRe.FindStringSubmatch(s)
	require.NotNil(t, m, "no run ID in:\n%s", s)
	return m[1]
}

func TestHelpListsTheImplementedCommands(t *testing.T) {
	c := newCLI(t)
	r := c.run("help")
	require.Equal(t, 0, r.code, r)
	for _, verb := range []string{"run", "validate", "plan", "call", "steps", "schema", "runs", "schedule", "sim", "serve", "config"} {
		assert.Regexp(t, `(?m)^  `+verb+` `, r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	c := newCLI(t)
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"an unknown command suggests the closest one", []string{"valdate", "x.yaml"}, `did you mean "validate"`},
		{"run without a file says what is missing", []string{"run"}, "missing the playbook FILE"},
		{"an unknown flag is a usage error", []string{"run", "--nope", "x.yaml"}, "flag provided but not defined: -nope"},
		{"a bad --output value is refused", []string{"steps", "--output", "xml"}, "want text or json"},
		{"an unknown runs command is refused", []string{"runs", "lst"}, `did you mean "list"`},
		{"no command at all prints the help", nil, "Usage: runbook COMMAND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run(tt.args...)
			assert.Equal(t, 2, r.code, r)
			assert.Contains(t, r.stderr, tt.stderr)
			if tt.args != nil {
				assert.Contains(t, r.stderr, "Try: runbook")
			}
		})
	}
}

func TestVerbHelpGoesToStdoutWithExitZero(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{{"run", "-h"}, {"help", "plan"}, {"runs", "approve", "-h"}, {"runs", "-h"}} {
		r := c.run(args...)
		assert.Equal(t, 0, r.code, r)
		assert.Equal(t, 1, strings.Count(r.stdout, "Usage: runbook"), args)
	}
	r := c.run("run", "--help")
	assert.Contains(t, r.stdout, "-resume")
	assert.Contains(t, r.stdout, "-output")
}

func TestFlagsMayFollowPositionalArguments(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	r := c.run("run", pb, "-i", "who=after", "--output", "json", "--state", filepath.Join(c.dir, "other.db"))
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, `"who": "after"`)
	_, err := os.Stat(filepath.Join(c.dir, "other.db"))
	assert.NoError(t, err, "--state after the file is honoured")
}

func TestStateFileDefaultsToXDGStateHome(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	c.env = withoutEnv(c.env, "RUNBOOK_STATE")
	c.env = append(c.env, "XDG_STATE_HOME="+filepath.Join(c.dir, "xdg"))
	r := c.run("run", pb)
	require.Equal(t, 0, r.code, r)
	fi, err := os.Stat(filepath.Join(c.dir, "xdg", "runbook", "state.db"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	c.env = withoutEnv(c.env, "XDG_STATE_HOME")
	r = c.run("run", pb)
	require.Equal(t, 0, r.code, r)
	_, err = os.Stat(filepath.Join(c.dir, ".local", "state", "runbook", "state.db"))
	assert.NoError(t, err, "falls back to ~/.local/state/runbook/state.db")
}

func withoutEnv(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// TestOnlyInstantCommandsLeaveCtrlCItsDefault: a command that prints and
// returns at once sets up no signal handling (Ctrl-C ends it as any
// program); every other one winds down on the first signal.
func TestOnlyInstantCommandsLeaveCtrlCItsDefault(t *testing.T) {
	for _, args := range [][]string{nil, {"version"}, {"version", "--json"}, {"steps"}, {"schema"}, {"help", "run"}, {"--help"}, {"-h"}} {
		assert.True(t, instant(args), "%q", args)
	}
	for _, args := range [][]string{{"run", "x.yaml"}, {"serve"}, {"completion", "__complete", "runs", "show"}, {"runs"}, {"validate", "x.yaml"}, {"nosuchverb"}} {
		assert.False(t, instant(args), "%q", args)
	}
}
