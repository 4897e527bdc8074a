package server

import (
	"errors"
	"net/http"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
)

// preflightOr422 checks a run the API is asked to start against the live
// services' own limits (a version /v1/supports does not offer), literal
// params and params read from the given inputs alike, as `runbook run`
// does. Findings are answered 422, one problem each at its position in
// the playbook, and no run is created; it reports whether the run may
// start. A service that cannot be reached is no finding.
func (s *Server) preflightOr422(w http.ResponseWriter, r *http.Request, pb *playbook.Playbook, inputs map[string]any) bool {
	err := s.eng.PreflightInputs(r.Context(), pb, inputs)
	if err == nil {
		return true
	}
	var diags playbook.Diagnostics
	if !errors.As(err, &diags) {
		writeErr(w, err)
		return false
	}
	problems := make([]string, len(diags))
	for i, d := range diags {
		problems[i] = d.String()
	}
	writeError(w, http.StatusUnprocessableEntity, fault.Invalid,
		"the service refuses a value of this run (checked before it starts); nothing was started", problems...)
	return false
}
