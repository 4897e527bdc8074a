// Command runbook runs durable workflow playbooks: validate and plan them,
// run them with live progress, answer their approvals, inspect past runs,
// and call single step types ad hoc.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/runbook/runbook/internal/fault"
	_ "github.com/runbook/runbook/internal/steps/all" // every built-in step type

	"github.com/runbook/runbook/internal/suggest"
)

func main() {
	ctx, stop := context.Background(), func() {}
	if !instant(os.Args[1:]) {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		go func() {
			// After the first signal the run winds down; a second one kills
			// the process with the default behaviour.
			<-ctx.Done()
			stop()
		}()
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// instant reports whether the command line asks for help or names a verb
// that prints and returns at once (verb.instant): Ctrl-C keeps its default
// there, ending the process, and no signal handling is set up (it cost
// `runbook version` a thread and a goroutine).
func instant(args []string) bool {
	if len(args) == 0 {
		return true
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return true
	}
	v := findVerb(args[0])
	return v != nil && v.instant
}

// verb is one `runbook VERB`.
type verb struct {
	name    string
	summary string
	usage   string // after "runbook NAME "
	run     func(ctx context.Context, a *app, args []string) error
	// instant: it prints and returns at once, reading no state and
	// calling nothing (see instant).
	instant bool
}

// verbs lists the implemented verbs in the order `runbook help` shows them.
var verbs []*verb

func init() {
	verbs = []*verb{initVerb, runVerb, validateVerb, testVerb, planVerb, callVerb, stepsVerb, schemaVerb, runsVerb, scheduleVerb, pauseVerb, resumeVerb, simVerb, serveVerb, agentVerb, agentsVerb, tokenVerb, notifyVerb, auditVerb, drainVerb, migrateVerb, stateVerb, configVerb, versionVerb, completionVerb}
}

func findVerb(name string) *verb {
	for _, v := range verbs {
		if v.name == name {
			return v
		}
	}
	return nil
}

// app is what every verb gets: the output streams and, once opened, the
// process-wide redactor.
type app struct {
	stdout, stderr io.Writer
	redactor       redactor
	verb           *verb
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, redactor: nopRedactor{}}
	if len(args) == 0 {
		printHelp(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && name == "help" {
			if v := findVerb(args[1]); v != nil {
				a.verb = v
				_ = v.run(ctx, a, append([]string{"-h"}, args[2:]...))
				return 0
			}
			return a.report(usageErrorf("help", "unknown command %q", args[1]))
		}
		printHelp(stdout)
		return 0
	}
	v := findVerb(name)
	if v == nil {
		msg := fmt.Sprintf("unknown command %q", name)
		msg += suggest.Hint(name, verbNames())
		return a.report(&exitError{code: 2, err: errors.New(msg), hint: "runbook help"})
	}
	a.verb = v
	err := v.run(ctx, a, args[1:])
	if errors.Is(err, errHelpShown) {
		return 0
	}
	return a.report(err)
}

func verbNames() []string {
	out := make([]string, len(verbs))
	for i, v := range verbs {
		out[i] = v.name
	}
	return out
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "runbook runs durable workflow playbooks.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: runbook COMMAND [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	width := 0
	for _, v := range verbs {
		width = max(width, len(v.name))
	}
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, v.name, v.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit codes: 0 success, 1 run failed or cancelled, 2 usage or validation error,")
	fmt.Fprintln(w, "3 the run is another process's (taken over by a replica) and goes on there.")
	fmt.Fprintln(w, "Run 'runbook help COMMAND' or 'runbook COMMAND -h' for details.")
}

// exitError carries the exit code and the hint of a failed command.
type exitError struct {
	code int
	err  error
	hint string // a command line to try, without "Try: "
	// quiet means the error text was already printed (diagnostics).
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errHelpShown is returned after -h printed a verb's usage.
var errHelpShown = errors.New("help shown")

// errSilent ends a command with code without printing anything more.
func errSilent(code int) error { return &exitError{code: code, err: errors.New("exit"), quiet: true} }

func usageErrorf(verbName, format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...), hint: "runbook " + verbName + " -h"}
}

// withHint wraps err with a hint unless it already has one; the exit code
// comes from the error's classification.
func withHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: fault.ExitCode(err), err: err, hint: hint}
}

// report prints err (redacted) with its hint and returns the exit code.
func (a *app) report(err error) int {
	if err == nil {
		return 0
	}
	code := fault.ExitCode(err)
	hint := ""
	var ee *exitError
	if errors.As(err, &ee) {
		code, hint = ee.code, ee.hint
		if ee.quiet {
			if hint != "" {
				fmt.Fprintln(a.stderr, "Try: "+hint)
			}
			return code
		}
	}
	msg := a.redactor.String(err.Error())
	if strings.Contains(msg, "\n") {
		fmt.Fprintln(a.stderr, strings.TrimRight(msg, "\n"))
	} else {
		fmt.Fprintln(a.stderr, "error: "+msg)
	}
	if hint != "" {
		fmt.Fprintln(a.stderr, "Try: "+hint)
	}
	if code == 0 {
		code = 1
	}
	return code
}
