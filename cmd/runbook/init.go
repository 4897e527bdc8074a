package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

var initVerb = &verb{
	name:    "init",
	summary: "write a starter playbook and runbook.yaml to begin with",
	run:     cmdInit,
}

// starterPlaybook is the playbook `runbook init` writes: it runs to
// success with `runbook run playbooks/hello.yaml --sim`.
const starterPlaybook = `# A starter playbook. Try it against the built-in simulators:
#
#   runbook validate playbooks/hello.yaml
#   runbook plan playbooks/hello.yaml -i who=ops
#   runbook run playbooks/hello.yaml --sim -i who=ops
#
# 'runbook steps' lists every step type; 'runbook steps TYPE' shows its params
# and outputs. For completion in an editor: runbook schema > playbook.schema.json
# and point the yaml-language-server at it.
version: 1
name: hello
description: Greet someone and count the clusters of the NKS connection.

# Inputs are given with -i NAME=VALUE (or by a trigger under runbook serve).
inputs:
  who: {type: string, default: world, description: whom to greet}

# Under runbook serve this would run every day at 09:00 (the server's zone).
# triggers:
#   - schedule: {cron: "0 9 * * *"}

steps:
  - id: greet
    uses: log
    with:
      message: "hello ${{ inputs.who }}"

  # A read-only call to a cloud service. With --sim it reaches the embedded
  # simulator; without it, set the nks connection under connections: in
  # runbook.yaml (runbook run reads it from the working directory, or
  # --config FILE; runbook serve too).
  - id: clusters
    uses: nks.cluster.list
    retry: {attempts: 3, delay: 2s}

  - id: report
    uses: log
    with:
      message: "${{ steps.clusters.outputs.count }} clusters"
`

// starterConfig is the runbook.yaml `runbook init` writes. Every field is
// optional; it names the defaults so they can be changed.
const starterConfig = `# runbook.yaml: the config of 'runbook serve' (docs/config.md). 'runbook run'
# takes its connections, http policy and secrets_file too (from the working
# directory, or --config FILE).
# Every field is optional; these are the defaults. Check it with:
#
#   runbook config check runbook.yaml

# The directory of playbooks that runbook serve loads and reloads.
playbooks: playbooks

server:
  # Loopback only; write 0.0.0.0:8088 to listen on every interface.
  listen: 127.0.0.1:8088
  # The name of the secret that holds the API token (never the token itself).
  token_secret: RUNBOOK_API_TOKEN

# Fire the playbooks' schedule triggers.
schedules: true

# Default settings of a connection, a literal or ${{ secrets.NAME }}:
# connections:
#   nks:
#     region: kr1
#     password: ${{ secrets.NKS_PASSWORD }}
`

func cmdInit(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "init",
		usage:   "[DIR] [--force]",
		summary: "Write a starter playbook (DIR/playbooks/hello.yaml) and config (DIR/runbook.yaml); DIR defaults to the working directory.",
		details: `Existing files are not overwritten (exit 2, naming them) unless --force.
Then: runbook run DIR/playbooks/hello.yaml --sim`,
	})
	force := fs.Bool("force", false, "overwrite files that exist")
	pos, err := parsePositional(fs, args, 0, 1, "")
	if err != nil {
		return err
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	files := []struct{ path, content string }{
		{filepath.Join(dir, "runbook.yaml"), starterConfig},
		{filepath.Join(dir, "playbooks", "hello.yaml"), starterPlaybook},
	}
	if !*force {
		var taken []string
		for _, f := range files {
			if _, err := os.Lstat(f.path); err == nil {
				taken = append(taken, f.path)
			} else if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("init: %w", err)
			}
		}
		if len(taken) > 0 {
			return &exitError{code: 2, err: fmt.Errorf("not overwriting %s", strings.Join(taken, ", ")), hint: "runbook init --force " + dir}
		}
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		if err := os.WriteFile(f.path, []byte(f.content), 0o644); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		fmt.Fprintf(a.stdout, "wrote %s\n", f.path)
	}
	fmt.Fprintf(a.stdout, "next: runbook run %s --sim\n", files[1].path)
	return nil
}
