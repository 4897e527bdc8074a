package main

import (
	"context"
	"fmt"
	"strings"
)

var validateVerb = &verb{
	name:    "validate",
	summary: "check playbooks and print every problem with its position",
	run:     cmdValidate,
}

func cmdValidate(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "validate",
		usage:   "FILE...",
		summary: "Check playbooks: structure, step params, expressions and references.",
		details: `Every problem of every file is printed to stderr as file:line:col: path: message.
Each valid file prints "ok  FILE (N steps)". Exit 2 when any file is invalid.`,
	})
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1, -1, "the playbook FILE to validate"); err != nil {
		return err
	}
	bad := 0
	for _, file := range pos {
		pb, err := loadPlaybook(file)
		if err != nil {
			bad++
			fmt.Fprintln(a.stderr, strings.TrimRight(err.Error(), "\n"))
			continue
		}
		n := len(pb.Steps) + len(pb.OnFailure) + len(pb.Finally)
		unit := "steps"
		if n == 1 {
			unit = "step"
		}
		fmt.Fprintf(a.stdout, "ok  %s (%d %s)\n", file, n, unit)
	}
	if bad > 0 {
		what := "1 file is invalid"
		if bad > 1 {
			what = fmt.Sprintf("%d files are invalid", bad)
		}
		fmt.Fprintln(a.stderr, what)
		return &exitError{code: 2, err: fmt.Errorf("%s", what), quiet: true, hint: "runbook steps TYPE shows the params of a step type; runbook schema gives editors the JSON Schema"}
	}
	return nil
}
