package server

import (
	"net"
	"net/http"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
)

// The runbook agents' protocol (internal/agent, docs/agents.md): the
// agents dial out to any replica and long-poll it.

func (s *Server) agentRegister(w http.ResponseWriter, r *http.Request) {
	var reg api.AgentRegister
	if !decodeBody(w, r, &reg) {
		return
	}
	id := authzOf(r).id
	if err := id.MayClaim(reg.Labels); err != nil {
		writeJSON(w, http.StatusForbidden, api.ErrorBody{Error: err.Error(), Code: string(fault.Unauthorized), Permission: string(auth.WorkAsAgent)})
		return
	}
	addr, _, _ := net.SplitHostPort(r.RemoteAddr)
	sess, err := s.agents.Register(r.Context(), reg, addr, id.Name)
	if err != nil {
		writeErr(w, err)
		return
	}
	noteAudit(r, "agent", reg.Name)
	noteAudit(r, "labels", reg.Labels)
	writeJSON(w, http.StatusOK, sess)
}

func (s *Server) agentPoll(w http.ResponseWriter, r *http.Request) {
	var p api.AgentPoll
	if !decodeBody(w, r, &p) {
		return
	}
	work, err := s.agents.Poll(r.Context(), p)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, work)
}

func (s *Server) agentLines(w http.ResponseWriter, r *http.Request) {
	var l api.AgentLines
	if !decodeBody(w, r, &l) {
		return
	}
	if err := s.agents.Lines(r.Context(), r.PathValue("id"), l); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) agentHost(w http.ResponseWriter, r *http.Request) {
	var hc api.AgentHostCall
	if !decodeBody(w, r, &hc) {
		return
	}
	ans, err := s.agents.Host(r.Context(), r.PathValue("id"), hc)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

func (s *Server) agentResult(w http.ResponseWriter, r *http.Request) {
	var res api.AgentResult
	if !decodeBody(w, r, &res) {
		return
	}
	if err := s.agents.Result(r.Context(), r.PathValue("id"), res); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	list, err := s.agents.List(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}
