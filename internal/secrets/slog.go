package secrets

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Handler wraps h so that the message and every attribute of every record
// are redacted before h sees them: string values, group members, resolved
// LogValuers, errors and JSON-like values, including attributes attached
// with WithAttrs. Values registered after the handler was made are masked
// too, attached attributes included.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	return &handler{r: r, base: h}
}

// handler keeps the attributes and groups added with WithAttrs and
// WithGroup unredacted in ops, and applies them, redacted, to base. The
// result is cached per Redactor generation, so a value registered later is
// masked in attributes attached earlier.
type handler struct {
	r    *Redactor
	base slog.Handler // the wrapped handler, before any op
	ops  []op

	mu    sync.Mutex
	gen   uint64
	built slog.Handler // base with ops applied, redacted as of gen
}

// op is one WithAttrs (attrs) or WithGroup (group) call.
type op struct {
	group string
	attrs []slog.Attr
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.base.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	inner := h.current()
	if h.r.load() == nil {
		return inner.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	attrs := make([]slog.Attr, 0, rec.NumAttrs())
	rec.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, h.r.attr(a))
		return true
	})
	out.AddAttrs(attrs...)
	return inner.Handle(ctx, out)
}

// current returns base with the ops applied and redacted with the values
// registered now.
func (h *handler) current() slog.Handler {
	if len(h.ops) == 0 {
		return h.base
	}
	gen := h.r.generation()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.built != nil && h.gen == gen {
		return h.built
	}
	b := h.base
	for _, o := range h.ops {
		if o.attrs == nil {
			b = b.WithGroup(h.r.String(o.group))
			continue
		}
		attrs := make([]slog.Attr, len(o.attrs))
		for i, a := range o.attrs {
			attrs[i] = h.r.attr(a)
		}
		b = b.WithAttrs(attrs)
	}
	h.built, h.gen = b, gen
	return b
}

func (h *handler) with(o op) *handler {
	ops := make([]op, len(h.ops), len(h.ops)+1)
	copy(ops, h.ops)
	return &handler{r: h.r, base: h.base, ops: append(ops, o)}
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(op{attrs: append([]slog.Attr{}, attrs...)})
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(op{group: name})
}

// attr returns a with its key and value redacted.
func (r *Redactor) attr(a slog.Attr) slog.Attr {
	snap := r.load()
	if snap == nil {
		return a
	}
	a.Key = r.String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		out := make([]slog.Attr, len(group))
		for i, g := range group {
			out[i] = r.attr(g)
		}
		a.Value = slog.GroupValue(out...)
	case slog.KindAny:
		a.Value = r.anyValue(v.Any())
	default:
		a.Value = v // numbers, bools, times, durations: nothing to hide
	}
	return a
}

func (r *Redactor) anyValue(x any) slog.Value {
	switch x := x.(type) {
	case error:
		if msg := x.Error(); r.Contains(msg) {
			return slog.StringValue(r.String(msg))
		}
		return slog.AnyValue(x)
	case fmt.Stringer:
		if str := x.String(); r.Contains(str) {
			return slog.StringValue(r.String(str))
		}
		return slog.AnyValue(r.Value(x))
	default:
		return slog.AnyValue(r.Value(x))
	}
}
