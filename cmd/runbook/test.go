package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/playtest"
)

var testVerb = &verb{
	name:    "test",
	summary: "run playbook tests (*.test.yaml) against the simulators",
	run:     cmdTest,
}

// testFlags are the flags of `runbook test`.
type testFlags struct {
	parallel int
	run      string
	out      *outputFlag
	junit    string
	cover    bool
	schema   bool
	keep     bool
	timeout  time.Duration
}

func cmdTest(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "test",
		usage:   "[PATH...] [flags]",
		summary: "Run the cases of playbook test files against in-process simulators.",
		details: `Each PATH is a test file or a directory searched for *.test.yaml (default:
the current directory). Every case runs against its own simulators, on a
fast simulated clock, with its own temporary state; cases run in parallel.
A line per case reads like go test's; a failed expectation is printed as
file:line:col: path: expected X, got Y.

--run REGEX runs the cases whose name (FILE/CASE, FILE the test file's
name without .test.yaml) it matches. --cover prints which steps ran and
which branches (if, retry, continue_on_error, on_failure) were taken.
--junit FILE also writes JUnit XML for CI; --output json prints one
document. --schema prints the JSON Schema of test files.

Steps run with HOME and XDG_* set to a temporary directory of this
process, so a playbook under test never writes to your own files.

Exit codes: 0 every case passed, 1 a case failed, 2 an invalid test file
(diagnostics like validate's) or a usage error.`,
	})
	tf := testFlags{}
	fs.IntVar(&tf.parallel, "p", playtest.DefaultParallel(), "run at most `N` cases at once")
	fs.StringVar(&tf.run, "run", "", "run only the cases whose FILE/CASE name matches `REGEX`")
	tf.out = addOutputFlag(fs, "text")
	fs.StringVar(&tf.junit, "junit", "", "also write the results as JUnit XML to `FILE`")
	fs.BoolVar(&tf.cover, "cover", false, "print the coverage of each tested playbook")
	fs.BoolVar(&tf.schema, "schema", false, "print the JSON Schema of test files and exit")
	fs.BoolVar(&tf.keep, "keep", false, "keep each case's directory (its path is printed)")
	fs.DurationVar(&tf.timeout, "timeout", playtest.DefaultTimeout, "fail a case that runs longer than `DURATION` (real time)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if tf.schema {
		return writeTestSchema(a)
	}
	if tf.parallel < 1 {
		return usageErrorf("test", "-p must be at least 1 (got %d)", tf.parallel)
	}
	var filter *regexp.Regexp
	if tf.run != "" {
		if filter, err = regexp.Compile(tf.run); err != nil {
			return usageErrorf("test", "--run: %v", err)
		}
	}
	if len(pos) == 0 {
		pos = []string{"."}
	}
	return a.runTests(ctx, pos, filter, tf)
}

func writeTestSchema(a *app) error {
	b, err := playtest.Schema()
	if err != nil {
		return withHint(err, "")
	}
	_, err = a.stdout.Write(b)
	return err
}

func (a *app) runTests(ctx context.Context, paths []string, filter *regexp.Regexp, tf testFlags) error {
	start := time.Now()
	found, err := playtest.Discover(paths)
	if err != nil {
		return &exitError{code: 2, err: err, hint: "runbook test PATH/TO/playbooks"}
	}
	if len(found) == 0 {
		return &exitError{code: 2, err: fmt.Errorf("no test files (*%s) in %s", playtest.Suffix, strings.Join(paths, ", ")),
			hint: "write one next to the playbook; docs/testing.md shows the format"}
	}
	home, err := isolateHome()
	if err != nil {
		return withHint(err, "")
	}
	defer os.RemoveAll(home)
	files, invalid := playtest.LoadAll(found)
	var invalidDiags []playtest.DiagnosticJSON
	for _, p := range found {
		if err, bad := invalid[p]; bad {
			invalidDiags = append(invalidDiags, testDiagnostics(p, err)...)
			if !tf.out.json {
				fmt.Fprintln(a.stderr, strings.TrimRight(err.Error(), "\n"))
			}
		}
	}
	jobs := playtest.Selected(files, filter)
	opts := playtest.Options{Timeout: tf.timeout, Keep: tf.keep}
	report := func(r *playtest.Result) {
		if tf.out.json {
			return
		}
		playtest.WriteCase(a.stdout, r)
		if r.Dir != "" {
			fmt.Fprintf(a.stdout, "    case directory kept: %s\n", r.Dir)
		}
	}
	results := playtest.RunAll(ctx, jobs, tf.parallel, opts, report)
	took := time.Since(start)
	if err := a.finishTests(results, invalid, invalidDiags, took, tf); err != nil {
		return err
	}
	return testExit(results, invalid, filter, jobs)
}

// finishTests prints coverage, the summary or the JSON document, and
// writes the JUnit file.
func (a *app) finishTests(results []*playtest.Result, invalid map[string]error, diags []playtest.DiagnosticJSON, took time.Duration, tf testFlags) error {
	var cov []*playtest.PlaybookCover
	if tf.cover {
		cov = playtest.Coverage(results)
	}
	if tf.junit != "" {
		if err := writeJUnitFile(tf.junit, results, invalid, took); err != nil {
			return &exitError{code: 2, err: err, hint: "runbook test --junit PATH/TO/report.xml"}
		}
	}
	if tf.out.json {
		rep := playtest.NewReport(results, diags, took)
		rep.Coverage = cov
		return rep.WriteJSON(a.stdout)
	}
	if tf.cover {
		playtest.WriteCoverage(a.stdout, cov)
	}
	playtest.WriteSummary(a.stdout, results, len(invalid), took)
	return nil
}

// testExit is 2 for an invalid file, 1 for a failed case, else 0.
func testExit(results []*playtest.Result, invalid map[string]error, filter *regexp.Regexp, jobs []playtest.Job) error {
	if len(invalid) > 0 {
		return &exitError{code: 2, err: errors.New("invalid test files"), quiet: true, hint: "fix the problems above; docs/testing.md describes the format"}
	}
	if filter != nil && len(jobs) == 0 {
		return &exitError{code: 2, err: fmt.Errorf("--run %s matches no case", filter), hint: "case names are FILE/CASE, FILE without .test.yaml"}
	}
	if slices.ContainsFunc(results, func(r *playtest.Result) bool { return !r.Passed }) {
		return errSilent(1)
	}
	return nil
}

func writeJUnitFile(path string, results []*playtest.Result, invalid map[string]error, took time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write JUnit report: %w", err)
	}
	if err := playtest.WriteJUnit(f, results, invalid, took); err != nil {
		f.Close()
		return fmt.Errorf("write JUnit report %s: %w", path, err)
	}
	return f.Close()
}

// testDiagnostics turns a load error into JSON diagnostics.
func testDiagnostics(file string, err error) []playtest.DiagnosticJSON {
	var ds playbook.Diagnostics
	if !errors.As(err, &ds) {
		return []playtest.DiagnosticJSON{{File: file, Message: err.Error()}}
	}
	out := make([]playtest.DiagnosticJSON, len(ds))
	for i, d := range ds {
		out[i] = playtest.DiagnosticJSON{File: d.Pos.File, Line: d.Pos.Line, Column: d.Pos.Col, Path: d.Path, Message: d.Message}
	}
	return out
}

// isolateHome points HOME and the XDG directories of this process at a new
// temporary directory and returns it. Steps that start programs (shell)
// inherit the process environment, not the run's `env`, so this is what
// keeps a playbook under test away from the user's own state and config.
func isolateHome() (string, error) {
	dir, err := os.MkdirTemp("", "runbook-test-home-")
	if err != nil {
		return "", fmt.Errorf("make the tests' home directory: %w", err)
	}
	for k, sub := range map[string]string{"HOME": "", "XDG_STATE_HOME": ".local/state", "XDG_CONFIG_HOME": ".config",
		"XDG_DATA_HOME": ".local/share", "XDG_CACHE_HOME": ".cache"} {
		if err := os.Setenv(k, filepath.Join(dir, sub)); err != nil {
			return "", err
		}
	}
	return dir, nil
}
