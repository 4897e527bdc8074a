package ui

import (
	"net/http"
	"sort"

	"github.com/runbook/runbook/internal/api"
)

// agentsData is the agents page's: the runbook agents connected to this
// server (docs/agents.md), each with its labels sorted for display.
type agentsData struct {
	List   api.AgentList
	Labels map[string][]string // by session: "k=v", sorted
}

// agentsPage lists the connected agents: labels, capacity and the
// attempts they run (with links to their runs), version, last heartbeat.
func (u *UI) agentsPage(w http.ResponseWriter, r *http.Request, s *session) {
	d := &agentsData{Labels: map[string][]string{}}
	if err := u.get(r.Context(), s, "/api/v1/agents", &d.List); err != nil {
		u.fail(w, r, s, err)
		return
	}
	for _, a := range d.List.Agents {
		var ls []string
		for k, v := range a.Labels {
			ls = append(ls, k+"="+v)
		}
		sort.Strings(ls)
		d.Labels[a.Session] = ls
	}
	u.render(w, r, http.StatusOK, "agents", &view{Title: "Agents", Nav: "agents", session: s, Data: d})
}
