package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
)

// DefaultDrainGrace is how long the runs executing may take to end once a
// drain began, unless configured (server.drain_grace) or asked.
const DefaultDrainGrace = 10 * time.Minute

// drainNote is who began the drain, and why.
type drainNote struct{ by, reason string }

// Drain begins draining this server for a rolling upgrade (SIGUSR1, POST
// /api/v1/drain): /readyz answers 503, new webhooks get 503 (the ones in
// flight are committed first), the scheduler stops (another replica leads
// it), run starts are refused with 503, and the run host lets go of its
// parked and queued runs and gives the executing ones grace (0: the
// configured one) before it suspends them (internal/runner/drain.go).
// It returns at once; DrainStatus follows it. A second call does nothing.
func (s *Server) Drain(grace time.Duration, by, reason string) {
	if grace <= 0 {
		grace = s.o.DrainGrace
	}
	if !s.drainBy.CompareAndSwap(nil, &drainNote{by: by, reason: reason}) {
		return
	}
	s.log.Warn("drain requested", "by", by, "reason", reason, "grace", grace)
	s.draining.Store(true)
	if stop := s.stopSched.Load(); stop != nil {
		(*stop)()
	}
	// The webhooks being handled are committed before the host drains, so
	// that it lets their runs go rather than leaving them to a restart.
	ctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownGrace)
	defer cancel()
	if err := s.intake.Shutdown(ctx); err != nil {
		s.log.Warn("webhook intake did not drain", "err", err)
	}
	s.runs.Drain(grace)
}

// DrainStatus is how far the drain is.
func (s *Server) DrainStatus() api.Drain {
	d := s.runs.DrainStatus()
	out := api.Drain{Draining: d.Draining, Executing: d.Executing, LetGo: d.LetGo, HandedOver: d.HandedOver,
		Suspended: d.Suspended, Empty: d.Empty}
	if d.Draining {
		since := d.Since.UTC()
		out.Since, out.Grace = &since, d.Grace.String()
	}
	if n := s.drainBy.Load(); n != nil {
		out.By, out.Reason = n.by, n.reason
	}
	return out
}

func (s *Server) drainStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.DrainStatus())
}

// drainRequest begins the drain (202) and answers its status; a server
// draining already answers its status (200).
func (s *Server) drainRequest(w http.ResponseWriter, r *http.Request) {
	var body api.DrainRequest
	if !decodeBody(w, r, &body) {
		return
	}
	var grace time.Duration
	if body.Grace != "" {
		d, err := time.ParseDuration(body.Grace)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, fault.Invalid, fmt.Sprintf("grace %q is no positive duration; use e.g. 30s, 10m", body.Grace))
			return
		}
		grace = d
	}
	status := http.StatusOK
	if !s.DrainStatus().Draining {
		status = http.StatusAccepted
		noteAudit(r, "reason", body.Reason)
		s.Drain(grace, callerName(r), body.Reason)
	}
	writeJSON(w, status, s.DrainStatus())
}
