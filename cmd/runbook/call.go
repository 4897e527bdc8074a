package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

var callVerb = &verb{
	name:    "call",
	summary: "run one step type ad hoc and print its outputs",
	run:     cmdCall,
}

func cmdCall(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "call",
		usage:   "TYPE [--with key=value ...] [--json '{...}'] [flags]",
		summary: "Run one step outside a playbook and print its outputs.",
		details: `--with values are JSON when they parse as JSON (3, true, [1,2], {"a":1}),
strings otherwise; key=@file reads the value from a file; a dotted key
(json.text=hi) sets a nested value. --with overrides keys of --json.
Cursors are kept in memory unless --state is given.`,
	})
	var with kvList
	fs.Var(&with, "with", "param `key=value` (repeatable)")
	jsonParams := fs.String("json", "", "params as one JSON `object`")
	out := addOutputFlag(fs, "json")
	var sf stateFlags
	sf.addState(fs)
	sf.addSecrets(fs)
	var sims simFlags
	sims.add(fs)
	var cfgPath string
	runConfigFlag(fs, &cfgPath)
	pos, err := parsePositional(fs, args, 1, 1, "the step TYPE (runbook steps lists them)")
	if err != nil {
		return err
	}
	d, err := lookupStep(pos[0])
	if err != nil {
		return err
	}
	params, err := callParams(*jsonParams, &with)
	if err != nil {
		return &exitError{code: 2, err: err, hint: "runbook steps " + d.Type}
	}
	cfg, err := a.loadRunConfig(cfgPath, "", &sf)
	if err != nil {
		return err
	}
	src, err := a.loadSecrets(&sf)
	if err != nil {
		return err
	}

	var decoded any
	var extra map[string]any
	if d.OutputsFromWith {
		extra = params
	} else {
		var problems []fault.Problem
		decoded, extra, problems = d.Decode(params)
		if len(problems) > 0 {
			for _, p := range problems {
				path := "with"
				if p.Path != "" {
					path += "." + p.Path
				}
				fmt.Fprintf(a.stderr, "%s: %s\n", path, a.redactor.String(p.Message))
			}
			return &exitError{code: 2, err: errors.New("invalid params"), quiet: true, hint: "runbook steps " + d.Type}
		}
	}

	conns, stopSim, err := sims.open(ctx)
	if err != nil {
		return err
	}
	defer stopSim()
	if conns.defaults, err = a.configConnections(cfg, src, conns.sim != nil); err != nil {
		return err
	}
	h := &callHost{src: src, red: a.redactor, conns: conns}
	if sf.state != "" {
		store, err := sf.openStore()
		if err != nil {
			return err
		}
		defer store.Close()
		h.store = store
	}
	dir, _ := os.Getwd()
	now := time.Now()
	c := &steps.Call{
		RunID:          "call-" + now.UTC().Format("20060102T150405"),
		StepID:         d.Type,
		Attempt:        1,
		Params:         decoded,
		Extra:          extra,
		IdempotencyKey: fmt.Sprintf("call-%d", now.UnixNano()),
		Dir:            dir,
		Log:            slog.New(a.redactor.Handler(&stderrHandler{w: a.stderr})),
		Now:            time.Now,
		Host:           h,
	}
	outputs, err := d.Run(ctx, c)
	if err != nil {
		if errors.Is(err, fault.ErrSuspended) {
			err = errNoApprovals
		}
		return withHint(err, "put the step in a playbook: runbook run playbook.yaml")
	}
	if outputs == nil {
		outputs = steps.Outputs{}
	}
	redacted, _ := a.redactor.Value(map[string]any(outputs)).(map[string]any)
	if redacted == nil {
		redacted = outputs
	}
	if out.json {
		return writeJSON(a.stdout, redacted)
	}
	keys := make([]string, 0, len(redacted))
	for k := range redacted {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(a.stdout, "%s: %s\n", k, compactJSON(redacted[k]))
	}
	return nil
}

// callParams builds the `with` map from --json and --with.
func callParams(jsonObj string, with *kvList) (map[string]any, error) {
	params := map[string]any{}
	if strings.TrimSpace(jsonObj) != "" {
		if err := json.Unmarshal([]byte(jsonObj), &params); err != nil {
			return nil, fmt.Errorf("--json: want a JSON object: %w", err)
		}
		if params == nil {
			params = map[string]any{}
		}
	}
	for i, k := range with.keys {
		v, err := jsonValue(with.vals[i])
		if err != nil {
			return nil, fmt.Errorf("--with %s: %w", k, err)
		}
		if err := setPath(params, k, v); err != nil {
			return nil, fmt.Errorf("--with %s: %w", k, err)
		}
	}
	return params, nil
}

// setPath sets m[a][b][c] for the key "a.b.c", creating maps on the way.
func setPath(m map[string]any, key string, v any) error {
	parts := strings.Split(key, ".")
	for i, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			if _, exists := m[p]; exists {
				return fmt.Errorf("%s is not an object", strings.Join(parts[:i+1], "."))
			}
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
	return nil
}

var (
	errNoApprovals    = &fault.Error{Code: fault.Invalid, Message: "approvals need a run: runbook call cannot wait for one"}
	errNoSubPlaybooks = &fault.Error{Code: fault.Invalid, Message: "sub-playbooks need a run: runbook call cannot start one"}
)

// callHost is the steps.Host of an ad hoc call: checkpoints in memory,
// cursors in memory or in the state file, secrets from the source.
type callHost struct {
	src   *secrets.Source
	red   redactor
	store state.Store // nil: cursors in memory
	conns *connections

	mu         sync.Mutex
	checkpoint []byte
	cursors    map[string][]byte
}

func (h *callHost) Checkpoint(_ context.Context, data []byte) error {
	h.mu.Lock()
	h.checkpoint = append([]byte(nil), data...)
	h.mu.Unlock()
	return nil
}

func (h *callHost) Cursor(ctx context.Context, key string) ([]byte, error) {
	if h.store != nil {
		b, err := h.store.GetCursor(ctx, key)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil
		}
		return b, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cursors[key], nil
}

func (h *callHost) SetCursor(ctx context.Context, key string, val []byte) error {
	val = h.red.Bytes(val)
	if h.store != nil {
		return h.store.PutCursor(context.WithoutCancel(ctx), key, val)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cursors == nil {
		h.cursors = map[string][]byte{}
	}
	h.cursors[key] = append([]byte(nil), val...)
	return nil
}

func (h *callHost) Connection(name string) (map[string]any, error) {
	return h.conns.resolve(name, nil)
}

func (h *callHost) Secret(name string) (string, bool) {
	if h.src == nil {
		return "", false
	}
	v, ok := h.src.Lookup(name)
	if ok {
		h.red.Add(v)
	}
	return v, ok
}

func (h *callHost) RunPlaybook(context.Context, string, map[string]any) (steps.Outputs, error) {
	return nil, errNoSubPlaybooks
}

func (h *callHost) Mask(s string) string { return h.red.String(s) }

func (h *callHost) AwaitApproval(context.Context, steps.ApprovalRequest) (steps.ApprovalResponse, error) {
	return steps.ApprovalResponse{}, errNoApprovals
}

// stderrHandler prints a called step's log records as "level message k=v".
type stderrHandler struct {
	mu    sync.Mutex
	w     interface{ Write([]byte) (int, error) }
	attrs []slog.Attr
}

func (h *stderrHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *stderrHandler) Handle(_ context.Context, r slog.Record) error {
	data := map[string]any{}
	for _, a := range h.attrs {
		data[a.Key] = a.Value.Resolve().Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		data[a.Key] = a.Value.Resolve().Any()
		return true
	})
	for k, v := range data {
		if err, ok := v.(error); ok {
			data[k] = err.Error()
		}
	}
	line := strings.ToLower(r.Level.String()) + ": " + r.Message + formatData(data) + "\n"
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write([]byte(line))
	return err
}

func (h *stderrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &stderrHandler{w: h.w, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *stderrHandler) WithGroup(string) slog.Handler { return h }
