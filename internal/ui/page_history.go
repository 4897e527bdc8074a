package ui

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/api"
)

// historyLimit is how many runs of each playbook the history page shows.
const historyLimit = 50

// history reads the newest runs of every playbook, n of each, in one API
// call (GET /api/v1/history, one store read), by playbook.
func (u *UI) history(ctx context.Context, s *session, n int) (map[string][]api.Run, error) {
	var h api.History
	if err := u.get(ctx, s, "/api/v1/history?limit="+strconv.Itoa(n), &h); err != nil {
		return nil, err
	}
	out := make(map[string][]api.Run, len(h.Playbooks))
	for _, p := range h.Playbooks {
		out[p.Playbook] = p.Runs
	}
	return out, nil
}

// historyData is the history page's: a row of runs per playbook.
type historyData struct {
	Limit int
	Rows  []historyRow
}

type historyRow struct {
	Playbook string
	Runs     []api.Run
}

// historyPage is the run history of every playbook: its last runs as a
// grid of statuses, newest first, each cell a link to its run.
func (u *UI) historyPage(w http.ResponseWriter, r *http.Request, s *session) {
	var h api.History
	if err := u.get(r.Context(), s, "/api/v1/history?limit="+strconv.Itoa(historyLimit), &h); err != nil {
		u.fail(w, r, s, err)
		return
	}
	d := &historyData{Limit: h.Limit}
	for _, p := range h.Playbooks {
		d.Rows = append(d.Rows, historyRow{Playbook: p.Playbook, Runs: p.Runs})
	}
	u.render(w, r, http.StatusOK, "history", &view{Title: "Run history", Nav: "playbooks", session: s, Data: d})
}

// cellTitle is what a history cell says on hover: the run, its status,
// how long it took and when it was created.
func cellTitle(now time.Time, run api.Run) string {
	t := run.ID + " · " + string(run.Status)
	if d := span(now, run.StartedAt, run.EndedAt); d != "" {
		t += " · " + d
	}
	return t + " · created " + absTime(run.CreatedAt)
}
