package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/sim"
)

var simVerb = &verb{
	name:    "sim",
	summary: "serve the API simulators on loopback",
	run:     cmdSim,
}

func cmdSim(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 && args[0] == "webhook" {
		return cmdSimWebhook(ctx, a, args[1:])
	}
	fs := newFlagSet(a, command{
		name:  "sim",
		usage: "[--addr 127.0.0.1:8089] [--speed N] [--services a,b] [--seed N]",
		summary: "Serve faithful simulators of every API runbook drives, until Ctrl-C: " +
			"asynchronous tasks on a scalable clock, documented errors and limits, a call journal, fault injection.",
		details: `Runs point at it with 'runbook run --sim-url http://ADDR PLAYBOOK'. Admin routes:
  GET  /_sim/connections        connection settings of every service
  GET  /_sim/journal?service=   the calls received (DELETE resets)
  POST /_sim/faults             {"service","method","path_prefix","status","latency","rate","count"}
  POST /_sim/clock              {"advance": "1h"}`,
	})
	addr := fs.String("addr", "127.0.0.1:8089", "listen `address` (loopback unless you choose otherwise)")
	speed := fs.Float64("speed", 1, "`n` simulated seconds per real second")
	services := fs.String("services", "", "comma-separated `names` to serve (default: all: "+strings.Join(sim.Names(), ", ")+")")
	seed := fs.Uint64("seed", 1, "`seed` of the generated data")
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	var names []string
	if *services != "" {
		names = strings.Split(*services, ",")
	}
	srv, err := sim.Start(ctx, sim.Options{Addr: *addr, Speed: *speed, Seed: *seed, Services: names})
	if err != nil {
		return &exitError{code: 1, err: err, hint: "runbook sim --addr 127.0.0.1:0 picks a free port"}
	}
	defer srv.Close()
	conns := srv.Connections()
	keys := make([]string, 0, len(conns))
	for k := range conns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(a.stdout, "simulators on http://%s (speed %gx)\n", srv.Addr(), *speed)
	for _, k := range keys {
		fmt.Fprintf(a.stdout, "  %-12s %s\n", k, srv.URL(k))
	}
	b, _ := yaml.Marshal(map[string]any{"connections": conns})
	fmt.Fprintf(a.stdout, "\nrun playbooks against it with: runbook run --sim-url http://%s PLAYBOOK\nconnection settings:\n%s", srv.Addr(), indent(string(b)))
	<-ctx.Done()
	fmt.Fprintln(a.stdout, "simulators stopped")
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}
