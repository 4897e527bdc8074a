package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// The controls of a playbook's schedules: pause and resume (recorded in
// the store, where every replica's scheduler reads them before each
// slot), run now, and backfill. Each is audited with what it did.

// pauseSchedules answers POST /api/v1/playbooks/{name}/schedules/pause.
func (s *Server) pauseSchedules(w http.ResponseWriter, r *http.Request) {
	pb, body, ok := s.scheduleControl(w, r)
	if !ok {
		return
	}
	reason := strings.TrimSpace(body.Reason)
	noteAudit(r, "reason", reason)
	if reason == "" {
		writeError(w, http.StatusBadRequest, fault.Invalid, `a pause needs a "reason" (it is shown beside every slot it skips)`)
		return
	}
	index, err := pausedTrigger(pb, body.Trigger)
	if err != nil {
		writeErr(w, err)
		return
	}
	noteAudit(r, "trigger", index)
	p := state.SchedulePause{Playbook: pb.Name, Trigger: index, Reason: reason, By: callerName(r), At: time.Now().UTC()}
	if err := s.store.PauseSchedule(r.Context(), p); err != nil {
		writeErr(w, err)
		return
	}
	s.sched.Refresh()
	s.log.Info("schedule paused", "playbook", pb.Name, "trigger", index, "by", p.By, "reason", reason)
	writeJSON(w, http.StatusOK, api.SchedulePauseAnswer{Status: "paused", Pause: p})
}

// resumeSchedules answers POST /api/v1/playbooks/{name}/schedules/resume:
// the pause of the trigger named (or of every trigger) is lifted; a
// trigger's own pause and one of every trigger are lifted each by its
// own resume.
func (s *Server) resumeSchedules(w http.ResponseWriter, r *http.Request) {
	pb, body, ok := s.scheduleControl(w, r)
	if !ok {
		return
	}
	if reason := strings.TrimSpace(body.Reason); reason != "" {
		noteAudit(r, "reason", reason)
	}
	index, err := pausedTrigger(pb, body.Trigger)
	if err != nil {
		writeErr(w, err)
		return
	}
	noteAudit(r, "trigger", index)
	p, err := s.store.ResumeSchedule(r.Context(), pb.Name, index)
	if errors.Is(err, state.ErrNotFound) {
		what := "its schedules are not paused"
		if index != state.AllTriggers {
			what = fmt.Sprintf("its trigger %d is not paused on its own", index)
		}
		writeError(w, http.StatusConflict, fault.Conflict, fmt.Sprintf("playbook %s: %s (GET /api/v1/schedules shows the pauses)", pb.Name, what))
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	s.sched.Refresh()
	s.log.Info("schedule resumed", "playbook", pb.Name, "trigger", index, "by", callerName(r))
	writeJSON(w, http.StatusOK, api.SchedulePauseAnswer{Status: "resumed", Pause: *p})
}

// runSchedule answers POST /api/v1/playbooks/{name}/schedules/run: a run
// of the schedule trigger starts now, with the inputs its trigger sets
// and the time asked as trigger.slot, recorded as started by the caller.
// A pause does not hold it: it is asked for.
func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request) {
	pb, body, ok := s.scheduleControl(w, r)
	if !ok {
		return
	}
	index, err := onlySchedule(pb, body.Trigger)
	if err != nil {
		writeErr(w, err)
		return
	}
	noteAudit(r, "trigger", index)
	req, err := trigger.ScheduleRequest(pb, index, time.Now(), map[string]any{"by": callerName(r), "via": trigger.ViaRunNow})
	if err != nil {
		writeErr(w, err)
		return
	}
	run, err := s.runs.StartRun(r.Context(), pb, engine.StartRequest{Inputs: req.Inputs, Trigger: req.Trigger})
	if err != nil {
		writeStartErr(w, err)
		return
	}
	noteAudit(r, "run", run.ID)
	w.Header().Set("Location", "/api/v1/runs/"+run.ID)
	writeJSON(w, http.StatusCreated, s.viewRun(run))
}

// backfillSchedule answers POST /api/v1/playbooks/{name}/schedules/backfill
// (trigger.Backfill): one run per slot of the range that has none.
func (s *Server) backfillSchedule(w http.ResponseWriter, r *http.Request) {
	pb := s.playbookOr404(w, r.PathValue("name"))
	if pb == nil {
		return
	}
	var body api.BackfillRequest
	if !decodeBody(w, r, &body) {
		return
	}
	index, err := onlySchedule(pb, body.Trigger)
	if err != nil {
		writeErr(w, err)
		return
	}
	var from, to time.Time
	for _, f := range []struct {
		name, val string
		to        *time.Time
	}{{"from", body.From, &from}, {"to", body.To, &to}} {
		if *f.to, err = time.Parse(time.RFC3339, f.val); err != nil {
			writeError(w, http.StatusBadRequest, fault.Invalid, fmt.Sprintf(`%q: want an RFC 3339 time like 2026-03-07T12:00:00Z, got %q`, f.name, f.val))
			return
		}
	}
	noteAudit(r, "trigger", index)
	noteAudit(r, "from", body.From)
	noteAudit(r, "to", body.To)
	if body.DryRun {
		noteAudit(r, "dry_run", true)
	}
	b := trigger.Backfill{Store: s.store, Preparer: s.runs, Playbook: pb, Trigger: index, From: from, To: to,
		Max: body.Max, DryRun: body.DryRun, Extra: map[string]any{"by": callerName(r), "via": trigger.ViaBackfill}}
	slots, err := b.Run(r.Context())
	out := api.BackfillAnswer{Playbook: pb.Name, Trigger: index, DryRun: body.DryRun, Slots: []api.BackfillSlot{}}
	for _, sl := range slots {
		if sl.Outcome == trigger.BackfillStarted {
			out.Started++
		}
		out.Slots = append(out.Slots, api.BackfillSlot{Slot: sl.Slot.Format(time.RFC3339), Outcome: sl.Outcome, Run: sl.Run, Note: sl.Note})
	}
	noteAudit(r, "started", out.Started)
	if err != nil {
		if out.Started > 0 {
			err = fmt.Errorf("%w (%d runs of the slots before it started)", err, out.Started)
		}
		writeStartErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// scheduleControl reads the playbook and body of a pause, resume or run.
func (s *Server) scheduleControl(w http.ResponseWriter, r *http.Request) (*playbook.Playbook, api.ScheduleControl, bool) {
	var body api.ScheduleControl
	pb := s.playbookOr404(w, r.PathValue("name"))
	if pb == nil || !decodeBody(w, r, &body) {
		return nil, body, false
	}
	return pb, body, true
}

// writeStartErr answers an error of a run start: 503 while the server
// shuts down, else by its code.
func writeStartErr(w http.ResponseWriter, err error) {
	if errors.Is(err, runner.ErrShuttingDown) {
		writeError(w, http.StatusServiceUnavailable, fault.Unavailable, err.Error())
		return
	}
	writeErr(w, err)
}

// scheduleIndexes lists the indexes of pb's schedule triggers.
func scheduleIndexes(pb *playbook.Playbook) []int {
	var out []int
	for i, t := range pb.Triggers {
		if t.Schedule != nil {
			out = append(out, i)
		}
	}
	return out
}

// pausedTrigger is the trigger a pause or resume names: the index given,
// which must be a schedule trigger, else every schedule trigger.
func pausedTrigger(pb *playbook.Playbook, index *int) (int, error) {
	all := scheduleIndexes(pb)
	switch {
	case len(all) == 0:
		return 0, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("playbook %s has no schedule triggers", pb.Name)}
	case index == nil:
		return state.AllTriggers, nil
	}
	return *index, isSchedule(pb, *index, all)
}

// onlySchedule is the trigger a run now or backfill names: the index
// given, else the playbook's only schedule trigger.
func onlySchedule(pb *playbook.Playbook, index *int) (int, error) {
	all := scheduleIndexes(pb)
	switch {
	case len(all) == 0:
		return 0, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("playbook %s has no schedule triggers", pb.Name)}
	case index != nil:
		return *index, isSchedule(pb, *index, all)
	case len(all) > 1:
		return 0, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("playbook %s has %d schedule triggers (%s): name one with \"trigger\"", pb.Name, len(all), indexList(all))}
	}
	return all[0], nil
}

func isSchedule(pb *playbook.Playbook, index int, all []int) error {
	if index < 0 || index >= len(pb.Triggers) || pb.Triggers[index].Schedule == nil {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("playbook %s has no schedule trigger at index %d (its schedule triggers: %s)", pb.Name, index, indexList(all))}
	}
	return nil
}

func indexList(all []int) string {
	s := make([]string, len(all))
	for i, x := range all {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
