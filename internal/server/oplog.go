package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// What an operator reads in serve's log: refused reloads one problem a
// line, each webhook delivery, each run that ends or waits.

// logReloadRefused logs a refused reload: a line that says so, then one
// line per problem (a problem's own lines too), never one joined blob.
func (s *Server) logReloadRefused(err error) {
	var le *loadError
	if !errors.As(err, &le) || len(le.Problems) == 0 {
		s.log.Error("reload refused: the playbooks in use are kept", "dir", s.o.Playbooks, "err", err)
		return
	}
	s.log.Error("reload refused: the playbooks in use are kept", "dir", s.o.Playbooks, "problems", len(le.Problems))
	for _, p := range le.Problems {
		for line := range strings.SplitSeq(strings.TrimRight(p, "\n"), "\n") {
			s.log.Error("reload problem", "problem", line)
		}
	}
}

// runEndTimeout bounds the read of a run's record for its end line.
const runEndTimeout = 2 * time.Second

// logRunEnd logs a run that ended (info; warn when it failed) or waits
// for an approval (info), with its playbook and how long it ran. lb is
// what the metrics labelled its end with (metrics.observe): the record is
// read only for a failed run's error, or a run this server did not
// launch.
func (s *Server) logRunEnd(runID string, ev state.Event, lb runLabel) {
	status, ok := strings.CutPrefix(ev.Type, "run.")
	if !ok {
		return
	}
	level := slog.LevelInfo
	switch state.RunStatus(status) {
	case state.RunSucceeded, state.RunCancelled, state.RunSkipped, state.RunWaiting:
	case state.RunFailed:
		level = slog.LevelWarn
	default:
		return
	}
	attrs := []any{"run_id", runID, "status", status}
	ctx, cancel := context.WithTimeout(context.Background(), runEndTimeout)
	defer cancel()
	if !lb.resolved && state.RunStatus(status) == state.RunWaiting {
		lb = s.metrics.labels.of(runID)
	}
	if lb.resolved && state.RunStatus(status) != state.RunFailed {
		attrs = append(attrs, "playbook", lb.name)
		if !lb.started.IsZero() && state.RunStatus(status) != state.RunWaiting {
			attrs = append(attrs, "duration", ev.Time.Sub(lb.started).Round(time.Millisecond).String())
		}
	} else if r, err := s.store.GetRun(ctx, runID); err == nil {
		attrs = append(attrs, "playbook", r.Playbook)
		if !r.StartedAt.IsZero() && !r.EndedAt.IsZero() {
			attrs = append(attrs, "duration", r.EndedAt.Sub(r.StartedAt).Round(time.Millisecond).String())
		}
		if r.Error != nil && state.RunStatus(status) != state.RunSucceeded {
			attrs = append(attrs, "error", r.Error.Message)
		}
	}
	msg := "run ended"
	if state.RunStatus(status) == state.RunWaiting {
		msg = "run waiting for an approval"
	}
	s.log.Log(ctx, level, msg, attrs...)
}

// logDeliveries logs each webhook delivery once answered: route, HTTP
// status and outcome with the runs it started (info), or why it was
// refused (warn; error for a failure of the server).
func (s *Server) logDeliveries(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, rep := deliveryReport(r)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := strings.TrimPrefix(r.URL.Path, "/hooks/")
		if len(route) > 64 {
			route = route[:64] + "…"
		}
		attrs := []any{"route", route, "code", rec.status}
		if rec.status == http.StatusOK {
			a := rep.Answer
			attrs = append(attrs, "outcome", a.Status, "runs", strings.Join(a.Runs[:min(len(a.Runs), deliveryRuns)], ","))
			if len(a.Runs) > deliveryRuns {
				attrs = append(attrs, "runs_total", len(a.Runs)) // the line names the first deliveryRuns
			}
			if len(a.Skipped) > 0 {
				attrs = append(attrs, "skipped", strings.Join(a.Skipped, ","))
			}
			s.log.Info("webhook delivery", attrs...)
			return
		}
		e := rep.Refused
		attrs = append(attrs, "err", e.Error)
		level := slog.LevelWarn
		if rec.status >= 500 {
			level = slog.LevelError
		}
		s.log.Log(r.Context(), level, "webhook delivery refused", attrs...)
	})
}
