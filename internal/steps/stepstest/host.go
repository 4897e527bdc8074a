// Package stepstest is the shared test harness for step types: an in-memory
// steps.Host (TestHost), a Call builder (NewCall) and the contract suite
// every step type passes (Contract: schema valid, honours cancellation, no
// goroutine leak).
package stepstest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// Host is an in-memory steps.Host. Fields may be set before a step runs;
// read the recorded state through the methods (they lock).
type Host struct {
	mu          sync.Mutex
	checkpoints [][]byte
	cursors     map[string][]byte
	requests    []steps.ApprovalRequest
	answers     chan steps.ApprovalResponse

	// Connections and Secrets answer Connection and Secret.
	Connections map[string]map[string]any
	Secrets     map[string]string
	// Suspend makes AwaitApproval return fault.ErrSuspended when no answer
	// is queued, as the CLI without a server does.
	Suspend bool
	// RunPlaybookFunc runs sub-playbooks; nil returns empty outputs.
	RunPlaybookFunc func(ctx context.Context, path string, inputs map[string]any) (steps.Outputs, error)
}

var _ steps.Host = (*Host)(nil)

// TestHost returns an empty in-memory host.
func TestHost() *Host {
	return &Host{
		cursors:     map[string][]byte{},
		answers:     make(chan steps.ApprovalResponse, 16),
		Connections: map[string]map[string]any{},
		Secrets:     map[string]string{},
	}
}

// Checkpoint records data; Last returns it.
func (h *Host) Checkpoint(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkpoints = append(h.checkpoints, append([]byte(nil), data...))
	return nil
}

// Checkpoints returns every checkpoint written, oldest first.
func (h *Host) Checkpoints() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.checkpoints...)
}

// LastCheckpoint returns the newest checkpoint, or nil: what the engine
// would pass as Call.Resume to the next attempt.
func (h *Host) LastCheckpoint() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.checkpoints) == 0 {
		return nil
	}
	return h.checkpoints[len(h.checkpoints)-1]
}

func (h *Host) Cursor(ctx context.Context, key string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cursors[key], nil
}

func (h *Host) SetCursor(ctx context.Context, key string, val []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cursors[key] = append([]byte(nil), val...)
	return nil
}

func (h *Host) Connection(name string) (map[string]any, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.Connections[name]
	if !ok {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q is not configured", name)}
	}
	return c, nil
}

func (h *Host) Secret(name string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.Secrets[name]
	return v, ok
}

func (h *Host) RunPlaybook(ctx context.Context, path string, inputs map[string]any) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h.RunPlaybookFunc == nil {
		return steps.Outputs{}, nil
	}
	return h.RunPlaybookFunc(ctx, path, inputs)
}

// Answer queues an answer for the next (or a waiting) AwaitApproval.
func (h *Host) Answer(r steps.ApprovalResponse) {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	h.answers <- r
}

// Mask masks the values of Secrets in s ("***"), as the engine's
// redactor masks secrets.
func (h *Host) Mask(s string) string {
	for _, v := range h.Secrets {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, "***")
		}
	}
	return s
}

// ApprovalRequests returns every request AwaitApproval received.
func (h *Host) ApprovalRequests() []steps.ApprovalRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]steps.ApprovalRequest(nil), h.requests...)
}

// AwaitApproval returns a queued answer, else ErrSuspended when Suspend is
// set, else waits for Answer, the request's deadline (a Timeout error) or
// the end of ctx.
func (h *Host) AwaitApproval(ctx context.Context, req steps.ApprovalRequest) (steps.ApprovalResponse, error) {
	h.mu.Lock()
	h.requests = append(h.requests, req)
	h.mu.Unlock()
	select {
	case r := <-h.answers:
		return r, nil
	default:
	}
	if h.Suspend {
		return steps.ApprovalResponse{}, fault.ErrSuspended
	}
	var deadline <-chan time.Time
	if !req.Deadline.IsZero() {
		t := time.NewTimer(time.Until(req.Deadline))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case r := <-h.answers:
		return r, nil
	case <-deadline:
		return steps.ApprovalResponse{}, &fault.Error{Code: fault.Timeout, Message: "approval was not answered in time"}
	case <-ctx.Done():
		return steps.ApprovalResponse{}, ctx.Err()
	}
}

// NewCall decodes with for d as the engine does (OutputsFromWith steps get
// the whole map as Extra) and returns a Call on a fresh TestHost, with Dir
// set to a new temporary directory. Problems fail the test.
func NewCall(t testing.TB, d *steps.Descriptor, with map[string]any) *steps.Call {
	t.Helper()
	c := &steps.Call{
		RunID:          "run-test",
		StepID:         "step",
		Attempt:        1,
		IdempotencyKey: "run-test/step",
		Dir:            t.TempDir(),
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:            time.Now,
		Host:           TestHost(),
	}
	if d.OutputsFromWith {
		c.Extra = with
		return c
	}
	p, extra, problems := d.Decode(with)
	require.Empty(t, problems, "params of %s", d.Type)
	c.Params, c.Extra = p, extra
	return c
}

// HostOf returns the TestHost of a Call built by NewCall.
func HostOf(c *steps.Call) *Host { return c.Host.(*Host) }
