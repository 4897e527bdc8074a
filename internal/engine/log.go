package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// eventHandler turns a step's log records into run events.
type eventHandler struct {
	sr      *stepRun
	attempt int
	attrs   []slog.Attr
	group   string
}

func (h *eventHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *eventHandler) Handle(_ context.Context, r slog.Record) error {
	data := make(map[string]any, len(h.attrs)+r.NumAttrs())
	for _, a := range h.attrs {
		addAttr(data, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(data, h.group, a)
		return true
	})
	if len(data) == 0 {
		data = nil
	}
	t := r.Time
	if t.IsZero() {
		t = h.sr.rs.e.o.Clock.Now()
	}
	h.sr.queue(state.Event{Time: t, Type: "log", Step: h.sr.rec.ID, Attempt: h.attempt,
		Level: r.Level.String(), Message: r.Message, Data: data})
	return nil
}

func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), prefixed(h.group, as)...)
	return &c
}

func (h *eventHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

func prefixed(group string, as []slog.Attr) []slog.Attr {
	if group == "" {
		return as
	}
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = slog.Attr{Key: group + "." + a.Key, Value: a.Value}
	}
	return out
}

func addAttr(m map[string]any, group string, a slog.Attr) {
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			addAttr(m, key, g)
		}
		return
	}
	switch v.Kind() {
	case slog.KindDuration:
		m[key] = v.Duration().String()
	case slog.KindTime:
		m[key] = v.Time().UTC().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			m[key] = err.Error()
			return
		}
		m[key] = v.Any()
	default:
		m[key] = v.Any()
	}
}
