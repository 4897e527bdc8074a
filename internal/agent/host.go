package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// workerHost is the steps.Host of an attempt on an agent: checkpoints,
// connections and cursors are the server's (asked for over the
// assignment, kept in memory only), secrets the agent's own.
type workerHost struct {
	w       *Worker
	ctx     context.Context
	session string
	id      string
}

func (h *workerHost) host(ctx context.Context, hc api.AgentHostCall) (api.AgentHostAnswer, error) {
	hc.Session = h.session
	var ans api.AgentHostAnswer
	if err := h.w.call(ctx, "/api/v1/agent/assignments/"+h.id+"/host", hc, &ans); err != nil {
		return ans, err
	}
	if ans.Error != nil {
		return ans, &fault.Error{Code: fault.Code(ans.Error.Code), Message: ans.Error.Message, Data: ans.Error.Data}
	}
	return ans, nil
}

func (h *workerHost) Checkpoint(ctx context.Context, data []byte) error {
	_, err := h.host(ctx, api.AgentHostCall{Op: "checkpoint", Data: data})
	return err
}

func (h *workerHost) Cursor(ctx context.Context, key string) ([]byte, error) {
	ans, err := h.host(ctx, api.AgentHostCall{Op: "cursor", Name: key})
	return ans.Data, err
}

func (h *workerHost) SetCursor(ctx context.Context, key string, val []byte) error {
	_, err := h.host(ctx, api.AgentHostCall{Op: "set_cursor", Name: key, Data: val})
	return err
}

// Connection asks the server: a connection's credentials are its
// secrets, sent with the attempt that needs them and kept in memory.
// Their values are masked in what the attempt prints.
func (h *workerHost) Connection(name string) (map[string]any, error) {
	ans, err := h.host(h.ctx, api.AgentHostCall{Op: "connection", Name: name})
	if err != nil {
		return nil, err
	}
	for _, v := range ans.Connection {
		if s, ok := v.(string); ok && len(s) >= 4 {
			h.w.Masker.Add(s)
		}
	}
	return ans.Connection, nil
}

// Secret resolves from the agent's environment or secrets file.
func (h *workerHost) Secret(name string) (string, bool) {
	v, ok := h.w.Secrets.Lookup(name)
	if ok {
		h.w.Masker.Add(v)
	}
	return v, ok
}

func (h *workerHost) Mask(s string) string { return h.w.Masker.String(s) }

func (h *workerHost) RunPlaybook(context.Context, string, map[string]any) (steps.Outputs, error) {
	return nil, &fault.Error{Code: fault.Invalid, Message: "a sub-playbook cannot run on an agent"}
}

func (h *workerHost) AwaitApproval(context.Context, steps.ApprovalRequest) (steps.ApprovalResponse, error) {
	return steps.ApprovalResponse{}, &fault.Error{Code: fault.Invalid, Message: "an approval cannot wait on an agent"}
}

// maxLinesBatch bounds the bytes of one request of lines, below the API's
// body limit (1 MiB).
const maxLinesBatch = 512 << 10

// lineSender batches an attempt's lines to the server: every 50 ms, or at
// half a batch, and at its end. Lines are masked with the agent's secrets
// before they leave (the server masks its own again).
type lineSender struct {
	w       *Worker
	session string
	id      string
	log     *slog.Logger

	mu      sync.Mutex
	pending []api.AgentLine
	bytes   int // of pending
	kick    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

func newLineSender(w *Worker, session, id string, log *slog.Logger) *lineSender {
	s := &lineSender{w: w, session: session, id: id, log: log, kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go s.loop()
	return s
}

func (s *lineSender) Line(stream, text string) {
	s.mu.Lock()
	s.pending = append(s.pending, api.AgentLine{Stream: stream, Text: s.w.Masker.String(text)})
	s.bytes += len(text) + 32
	n := s.bytes
	s.mu.Unlock()
	if n >= maxLinesBatch/2 {
		signal(s.kick)
	}
}

func (s *lineSender) loop() {
	defer close(s.stopped)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.kick:
		case <-s.done:
			s.flush()
			return
		}
		s.flush()
	}
}

func (s *lineSender) flush() {
	s.mu.Lock()
	all := s.pending
	s.pending, s.bytes = nil, 0
	s.mu.Unlock()
	for len(all) > 0 {
		n, size := 0, 0
		for n < len(all) && (n == 0 || size+len(all[n].Text)+32 <= maxLinesBatch) {
			size += len(all[n].Text) + 32
			n++
		}
		s.send(all[:n])
		all = all[n:]
	}
}

func (s *lineSender) send(batch []api.AgentLine) {
	err := s.w.call(context.Background(), "/api/v1/agent/assignments/"+s.id+"/lines", api.AgentLines{Session: s.session, Lines: batch}, nil)
	var fe *fault.Error
	switch {
	case errors.As(err, &fe) && fe.Code == fault.Conflict:
		s.w.cancel(s.id, errCancelled) // withdrawn or lost: stop the attempt
	case err != nil:
		s.log.Warn("send lines", "err", err, "lines", len(batch))
	}
}

// close sends what is left and stops.
func (s *lineSender) close() {
	close(s.done)
	<-s.stopped
}

// lineLogger prints a step's log records among its lines (stream stderr).
type lineLogger struct {
	out    *lineSender
	masker Masker
	attrs  []slog.Attr
}

func (l *lineLogger) Enabled(context.Context, slog.Level) bool { return true }

func (l *lineLogger) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	add := func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true }
	for _, a := range l.attrs {
		add(a)
	}
	r.Attrs(add)
	l.out.Line(steps.StreamStderr, l.masker.String(b.String()))
	return nil
}

func (l *lineLogger) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineLogger{out: l.out, masker: l.masker, attrs: append(append([]slog.Attr{}, l.attrs...), as...)}
}

func (l *lineLogger) WithGroup(string) slog.Handler { return l }
