package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/all"
)

// simFlags select the simulator a run talks to: --sim starts every
// simulator in this process; --sim-url uses a `runbook sim` running
// elsewhere (which survives this process, so a killed run can be resumed
// against the same simulated resources).
type simFlags struct {
	embedded bool
	url      string
	speed    float64
	// fromRun is the run whose recorded simulator url is (no flag given).
	fromRun string
}

func (f *simFlags) add(fs *flag.FlagSet) {
	fs.BoolVar(&f.embedded, "sim", false, "start the simulators in this process and point every connection at them")
	fs.StringVar(&f.url, "sim-url", "", "use the simulators of a running runbook sim at `URL` (e.g. http://127.0.0.1:8089)")
	fs.Float64Var(&f.speed, "sim-speed", 60, "with --sim: `n` simulated seconds per real second")
}

// connections resolves the settings of named connections: the simulator's
// when one is used (its address and credentials win), filled in by the
// playbook's `connections:` block.
type connections struct {
	sim map[string]map[string]any
	// defaults are the config file's connections (serve), under the
	// playbook's own values.
	defaults map[string]map[string]any
}

// open starts or reaches the simulator the flags ask for. stop releases it.
func (f *simFlags) open(ctx context.Context) (c *connections, stop func(), err error) {
	c, stop = &connections{}, func() {}
	switch {
	case f.embedded && f.url != "":
		return nil, nil, usageErrorf("run", "--sim and --sim-url exclude each other")
	case f.embedded:
		srv, err := sim.Start(ctx, sim.Options{Speed: f.speed})
		if err != nil {
			return nil, nil, err
		}
		c.sim = srv.Connections()
		return c, srv.Close, nil
	case f.url != "":
		c.sim, err = fetchConnections(ctx, f.url)
		if err != nil {
			hint := "start one with: runbook sim"
			if f.fromRun != "" {
				hint = "run " + f.fromRun + " was started with --sim-url " + f.url + "; start that simulator again (runbook sim --addr HOST:PORT), or give --sim-url"
			}
			return nil, nil, &exitError{code: 1, err: err, hint: hint}
		}
	}
	return c, stop, nil
}

func fetchConnections(ctx context.Context, base string) (map[string]map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := strings.TrimRight(base, "/") + "/_sim/connections"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("simulator URL %q: %w", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the simulator at %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the simulator at %s answered %s", base, resp.Status)
	}
	var out map[string]map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("read connections from %s: %w", base, err)
	}
	return out, nil
}

// resolve is the engine's Options.Connection.
func (c *connections) resolve(name string, override map[string]any) (map[string]any, error) {
	if inventory.Reserved(name) {
		return c.inventory(name, override)
	}
	out := map[string]any{}
	for k, v := range c.defaults[name] {
		out[k] = v
	}
	for k, v := range override {
		out[k] = v
	}
	simConn, fromSim := c.sim[name]
	for k, v := range simConn {
		out[k] = v
	}
	if len(out) == 0 {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"connection %q is not configured: add it under `connections:` in runbook.yaml (the config; --config FILE) or in the playbook, or run against the simulators with --sim (or --sim-url URL of a running `runbook sim`)", name)}
	}
	if c.sim != nil && !fromSim {
		names := make([]string, 0, len(c.sim))
		for n := range c.sim {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"connection %q has no simulator (simulated: %s); a rehearsal never reaches a real service", name, strings.Join(names, ", "))}
	}
	return out, nil
}

// inventory answers the inventory's connections (internal/inventory):
// the config's hosts: only, never a playbook's connections: entry (which
// could send a host's password to another address), and a host's
// credentials never in a rehearsal.
func (c *connections) inventory(name string, override map[string]any) (map[string]any, error) {
	if len(override) > 0 {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"connection %q belongs to the config's hosts: inventory; a playbook's connections: cannot set it", name)}
	}
	if name == inventory.Connection {
		if l, ok := c.defaults[name]; ok {
			return l, nil
		}
		return map[string]any{}, nil
	}
	host := strings.TrimPrefix(name, inventory.Prefix)
	settings, ok := c.defaults[name]
	switch {
	case !ok:
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"host %s is not in the inventory: add it under hosts: in runbook.yaml (the config; --config FILE), or give the step address and user", host)}
	case c.sim != nil:
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"host %s: a rehearsal (--sim, --sim-url) never reaches a real host", host)}
	}
	return settings, nil
}
