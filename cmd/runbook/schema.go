package main

import (
	"context"
	"fmt"

	"github.com/runbook/runbook/internal/playbook"
)

var schemaVerb = &verb{
	name:    "schema",
	summary: "print the JSON Schema of playbooks (for editors and CI)",
	run:     cmdSchema,
	instant: true,
}

func cmdSchema(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "schema",
		usage:   "",
		summary: "Print the JSON Schema of playbooks, generated from the step registry.",
		details: `Point an editor at it with a first line like
  # yaml-language-server: $schema=playbook.schema.json`,
	})
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	b, err := playbook.Schema()
	if err != nil {
		return withHint(fmt.Errorf("generate the schema: %w", err), "")
	}
	if _, err := a.stdout.Write(b); err != nil {
		return err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		fmt.Fprintln(a.stdout)
	}
	return nil
}
