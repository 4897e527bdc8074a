package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Run pauses (runbook pause): a pause, recorded in the store, holds the
// runs of the playbooks it selects at their next step boundary on every
// replica (internal/runner/pause.go); lifting it wakes them. Each is
// audited with its selector and reason.

// listPauses answers GET /api/v1/pauses.
func (s *Server) listPauses(w http.ResponseWriter, r *http.Request) {
	rules, err := s.store.RunPauses(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.PauseList{Pauses: []api.Pause{}}
	for _, p := range rules {
		out.Pauses = append(out.Pauses, s.viewPause(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// pauseRuns answers POST /api/v1/pauses (201): the runs of the playbooks
// selected stop starting steps.
func (s *Server) pauseRuns(w http.ResponseWriter, r *http.Request) {
	var body api.PauseRequest
	if !decodeBody(w, r, &body) {
		return
	}
	p := state.RunPause{Pattern: strings.TrimSpace(body.Pattern), Label: strings.TrimSpace(body.Label),
		Reason: strings.TrimSpace(body.Reason), By: callerName(r), At: time.Now().UTC()}
	noteAudit(r, "selector", p.Selector())
	noteAudit(r, "reason", p.Reason)
	if err := p.Check(); err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, err.Error())
		return
	}
	if p.Reason == "" {
		writeError(w, http.StatusBadRequest, fault.Invalid, `a pause needs a "reason" (every run it holds shows it)`)
		return
	}
	var err error
	for range 3 { // a new ID again if one collided
		p.ID = newPauseID()
		if err = s.runs.PauseRuns(r.Context(), p); !errors.Is(err, state.ErrExists) || s.pauseOfSelector(r, p) != nil {
			break
		}
	}
	if errors.Is(err, state.ErrExists) {
		msg := fmt.Sprintf("the runs of %s are paused already", p.Selector())
		if old := s.pauseOfSelector(r, p); old != nil {
			msg += fmt.Sprintf(" (pause %s, %s)", old.ID, old.Why())
		}
		writeError(w, http.StatusConflict, fault.Conflict, msg+": one pause per selector (GET /api/v1/pauses)")
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	if az := authzOf(r); az != nil {
		az.target = "pause:" + p.ID
	}
	w.Header().Set("Location", "/api/v1/pauses/"+p.ID)
	writeJSON(w, http.StatusCreated, api.PauseAnswer{Status: "paused", Pause: s.viewPause(p)})
}

// resumeRuns answers DELETE /api/v1/pauses/{id}: the pause is lifted and
// the runs it held are woken, on whichever replica holds them.
func (s *Server) resumeRuns(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := s.runs.ResumeRuns(r.Context(), id)
	if errors.Is(err, state.ErrNotFound) {
		writeError(w, http.StatusNotFound, fault.NotFound, fmt.Sprintf("no pause %s (GET /api/v1/pauses lists them)", id))
		return
	}
	if p != nil {
		noteAudit(r, "selector", p.Selector())
		noteAudit(r, "reason", p.Reason)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PauseAnswer{Status: "resumed", Pause: s.viewPause(*p)})
}

// pauseOfSelector returns the recorded pause with p's selector, if any.
func (s *Server) pauseOfSelector(r *http.Request, p state.RunPause) *state.RunPause {
	rules, err := s.store.RunPauses(r.Context())
	if err != nil {
		return nil
	}
	for i := range rules {
		if rules[i].Pattern == p.Pattern && rules[i].Label == p.Label {
			return &rules[i]
		}
	}
	return nil
}

// viewPause is p with the loaded playbooks it selects.
func (s *Server) viewPause(p state.RunPause) api.Pause {
	v := api.Pause{RunPause: p, Playbooks: []string{}}
	for _, pb := range s.cat.all() {
		if p.Selects(pb.Name, pb.Labels) {
			v.Playbooks = append(v.Playbooks, pb.Name)
		}
	}
	return v
}

// pauseOf returns the pause (this server's copy) that holds pb's runs.
func (s *Server) pauseOf(pb *playbook.Playbook) *state.RunPause {
	for _, p := range s.runs.Pauses() {
		if p.Selects(pb.Name, pb.Labels) {
			return &p
		}
	}
	return nil
}

// newPauseID returns a short random pause ID that a person can type.
func newPauseID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "p" + hex.EncodeToString(b)
}
