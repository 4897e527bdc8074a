package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
)

// historyLimit and maxHistoryLimit bound GET /api/v1/history's runs per
// playbook: 20 by default, at most 100.
const historyLimit, maxHistoryLimit = 20, 100

// listHistory answers GET /api/v1/history?limit=N: the newest runs of
// each loaded playbook the caller may see, as shown (interrupted when
// nothing executes them), read from the store in one read
// (state.Store.RecentRuns), whatever the number of playbooks.
func (s *Server) listHistory(w http.ResponseWriter, r *http.Request) {
	n := historyLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > maxHistoryLimit {
			writeError(w, http.StatusBadRequest, fault.Invalid, fmt.Sprintf("limit must be an integer in 1..%d", maxHistoryLimit))
			return
		}
	}
	var names []string
	for _, pb := range s.cat.all() {
		if visible(r, pb.Name) {
			names = append(names, pb.Name)
		}
	}
	recent, err := s.store.RecentRuns(r.Context(), names, n)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.History{Limit: n, Playbooks: make([]api.PlaybookHistory, 0, len(names))}
	for _, name := range names {
		h := api.PlaybookHistory{Playbook: name, Runs: make([]api.Run, 0, len(recent[name]))}
		for _, run := range recent[name] {
			h.Runs = append(h.Runs, s.viewShown(engine.Shown(s.store, run, s.executing)))
		}
		out.Playbooks = append(out.Playbooks, h)
	}
	writeJSON(w, http.StatusOK, out)
}
