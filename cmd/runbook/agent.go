package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runbook/runbook/internal/agent"
	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

var agentVerb = &verb{
	name:    "agent",
	summary: "execute the steps a runbook serve assigns to this machine (runs_on)",
	run:     cmdAgent,
}

var agentsVerb = &verb{
	name:    "agents",
	summary: "list the agents connected to a runbook serve",
	run:     cmdAgents,
}

// agentFlags are the command line of runbook agent.
type agentFlags struct {
	server, token, name, ca, cert, key, dir string
	labels, limits                          listFlag
	capacity                                int
	verbose                                 bool
	state                                   stateFlags
}

func cmdAgent(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:  "agent",
		usage: "--server URL [--token-secret NAME] --labels k=v[,k=v] [--capacity N] [--limit PATTERN=N]... [flags]",
		summary: "Register with a runbook serve (any replica), take the step attempts it assigns to this agent's labels " +
			"(runs_on: {labels: {...}}) and execute them here, sending their lines and results back. Dials out only.",
		details: `The token is the secret RUNBOOK_AGENT_TOKEN (environment or --secrets file),
made with: runbook token create NAME --role agent. Requests go over HTTPS
verified against the system's roots (or --ca FILE), through HTTPS_PROXY /
HTTP_PROXY when set; --cert and --key present a client certificate. The
agent keeps nothing on disk. Secrets the playbook reads with agent: are
resolved here, from this process's environment or --secrets file. See
docs/agents.md.`,
	})
	f := &agentFlags{}
	fs.StringVar(&f.server, "server", os.Getenv("RUNBOOK_SERVER"), "`URL` of runbook serve (default $RUNBOOK_SERVER)")
	fs.StringVar(&f.token, "token-secret", "RUNBOOK_AGENT_TOKEN", "`name` of the secret holding the agent's token")
	host, _ := os.Hostname()
	fs.StringVar(&f.name, "name", host, "the agent's `name` (default the host name)")
	fs.Var(&f.labels, "labels", "the agent's `labels`, k=v comma separated or repeated")
	fs.IntVar(&f.capacity, "capacity", 1, "how many step attempts this agent runs at once")
	fs.Var(&f.limits, "limit", "at most N attempts at once of the playbooks whose name matches `PATTERN=N` (a glob: heavy-*=1), repeated or comma separated; each counts on its own, --capacity bounds them all")
	fs.StringVar(&f.ca, "ca", "", "PEM `file` of the CA certificates that sign the server's (default: the system's roots)")
	fs.StringVar(&f.cert, "cert", "", "client certificate `file` (PEM), with --key")
	fs.StringVar(&f.key, "key", "", "client key `file` (PEM), with --cert")
	fs.StringVar(&f.dir, "dir", "", "`directory` the steps' relative paths resolve against (default the working directory)")
	fs.BoolVar(&f.verbose, "v", false, "log every attempt (info level)")
	f.state.addSecrets(fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	w, err := a.newWorker(f)
	if err != nil {
		return err
	}
	limits := ""
	if len(w.Limits) > 0 {
		limits = ", limits " + limitString(w.Limits)
	}
	fmt.Fprintf(a.stdout, "runbook agent %s: labels %s, capacity %d%s, server %s\n", w.Name, labelString(w.Labels), w.Capacity, limits, w.Server)
	return w.Run(ctx)
}

func (a *app) newWorker(f *agentFlags) (*agent.Worker, error) {
	hint := "runbook agent --server https://runbook.example.com --labels role=bastion --capacity 4"
	if !strings.HasPrefix(f.server, "https://") && !strings.HasPrefix(f.server, "http://") {
		return nil, &exitError{code: 2, err: fmt.Errorf("--server %q: want an https:// (or http:// on loopback) URL", f.server), hint: hint}
	}
	if f.capacity < 1 {
		return nil, &exitError{code: 2, err: errors.New("--capacity must be at least 1"), hint: hint}
	}
	labels, err := parseLabels(f.labels)
	if err != nil {
		return nil, &exitError{code: 2, err: err, hint: hint}
	}
	limits, err := parseLimits(f.limits, f.capacity)
	if err != nil {
		return nil, &exitError{code: 2, err: err, hint: "runbook agent --capacity 4 --limit 'heavy-*=1' ..."}
	}
	src, err := a.loadSecrets(&f.state)
	if err != nil {
		return nil, err
	}
	token, ok := src.Lookup(f.token)
	if !ok || token == "" {
		return nil, &exitError{code: 2, err: fmt.Errorf("the agent's token is not set (secret %s)", f.token),
			hint: "runbook token create " + f.name + " --role agent, then export " + f.token + "=..."}
	}
	a.redactor.Add(token)
	client, err := agentClient(f)
	if err != nil {
		return nil, &exitError{code: 2, err: err, hint: hint}
	}
	dir := f.dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(a.redactor.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})))
	return &agent.Worker{Server: strings.TrimRight(f.server, "/"), Token: token, Client: client, Name: f.name,
		Labels: labels, Capacity: f.capacity, Limits: limits, Version: buildVersion().Version, Dir: dir,
		Secrets: src, Masker: a.redactor, Logger: logger}, nil
}

// agentClient dials the server: TLS verified against the system's roots
// or --ca, a client certificate with --cert/--key, the environment's
// proxy.
func agentClient(f *agentFlags) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate in it", f.ca)
		}
		tc.RootCAs = pool
	}
	if (f.cert == "") != (f.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	tr.TLSClientConfig = tc
	// Each running attempt sends its lines and its result beside the poll:
	// kept open, their connections are not dialled (and, over TLS, shaken
	// hands) again for every request, as beyond the default 2 they were.
	tr.MaxIdleConnsPerHost = 2*f.capacity + 2
	return &http.Client{Transport: tr}, nil
}

// parseLabels reads k=v pairs.
func parseLabels(l listFlag) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range l {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--labels %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// parseLimits reads PATTERN=N limits for an agent of capacity.
func parseLimits(l listFlag, capacity int) ([]state.AgentLimit, error) {
	var out []state.AgentLimit
	for _, pn := range l {
		i := strings.LastIndexByte(pn, '=')
		n, err := strconv.Atoi(pn[i+1:])
		if i < 0 || err != nil {
			return nil, fmt.Errorf("--limit %q: want PATTERN=N, a playbook name pattern and how many attempts at once (heavy-*=1)", pn)
		}
		lim := state.AgentLimit{Pattern: pn[:i], Max: n}
		if err := lim.Check(capacity); err != nil {
			return nil, fmt.Errorf("--%w", err)
		}
		out = append(out, lim)
	}
	return out, nil
}

// limitString shows limits as --limit reads them: "heavy-*=1,nightly-*=2".
func limitString(limits []state.AgentLimit) string {
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

func labelString(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ",")
}

func cmdAgents(ctx context.Context, a *app, args []string) error {
	return dispatchSub(ctx, a, "agents", "The runbook agents connected to a runbook serve (docs/agents.md).",
		[]subVerb{{"list", "list the connected agents: labels, capacity, running attempts, limits, version, last heartbeat", cmdAgentsList}}, args)
}

func cmdAgentsList(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "agents list", usage: "[--server URL] [--output json]",
		summary: "List the agents connected to the runbook serve holding the state (or --server URL): labels, capacity, the attempts they run, their limits per playbook (held/most), version and last heartbeat.",
		details: "With replicas, each lists the agents polling it.",
	})
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	srv, err := openServerAPI(ctx, o, "runbook agents list asks a runbook serve", "pass --server URL (or set RUNBOOK_SERVER)")
	if err != nil {
		return err
	}
	var l api.AgentList
	if err := srv.do(ctx, http.MethodGet, "/api/v1/agents", nil, &l); err != nil {
		return withHint(err, "")
	}
	if out.json {
		return writeJSON(a.stdout, l)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLABELS\tRUNNING\tLIMITS\tVERSION\tLAST HEARTBEAT\tADDRESS")
	for _, ag := range l.Agents {
		// Each limit as RUNNING is: held/most.
		limits := make([]string, len(ag.Limits))
		for i, lim := range ag.Limits {
			limits[i] = fmt.Sprintf("%s %d/%d", lim.Pattern, lim.Held, lim.Max)
		}
		if len(limits) == 0 {
			limits = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s ago\t%s\n", ag.Name, labelString(ag.Labels), len(ag.Running), ag.Capacity, strings.Join(limits, ", "), ag.Version,
			time.Since(ag.LastHeartbeat).Round(100*time.Millisecond), ag.Address)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.Waiting > 0 {
		fmt.Fprintf(a.stdout, "%d attempts wait for an agent\n", l.Waiting)
	}
	return nil
}
