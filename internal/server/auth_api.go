package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/ui"
)

// authRoutes adds the routes of identities, tokens and the audit log.
func (s *Server) authRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/whoami", s.whoami)
	mux.HandleFunc("GET /api/v1/tokens", s.listTokens)
	mux.HandleFunc("POST /api/v1/tokens", s.createToken)
	mux.HandleFunc("DELETE /api/v1/tokens/{name}", s.revokeToken)
	mux.HandleFunc("GET /api/v1/audit", s.readAudit)
}

// callerName is the name of the request's identity ("" outside the API),
// recorded as who started, reran or retried a run, or paused a schedule.
// The shared server token names no one: a web UI session of it is
// recorded under the name given at sign-in, as its approval answers are.
func callerName(r *http.Request) string {
	id := IdentityOf(r.Context())
	if id == nil {
		return ""
	}
	if src, ok := ui.SourceOf(r.Context()); ok && id.Kind == auth.KindServer && src.Name != "" {
		return src.Name
	}
	return id.Name
}

// answerer returns who answers an approval and their roles. The shared
// server token names no one: its holder says who answers with by
// (default "api"), as before identities existed. Anyone else answers as
// themselves; a by naming someone else is refused.
func (s *Server) answerer(w http.ResponseWriter, r *http.Request, by string) (string, []string, bool) {
	id := IdentityOf(r.Context())
	if id == nil {
		return by, nil, by != ""
	}
	if id.Kind == auth.KindServer {
		if by == "" {
			by = "api"
		}
		return by, id.Roles(), true
	}
	if by != "" && by != id.Name {
		writeJSON(w, http.StatusForbidden, api.ErrorBody{Code: string(fault.Unauthorized), Permission: string(auth.ApproveRuns),
			Error: fmt.Sprintf("%s may not answer on behalf of %s: an answer is recorded under the caller's own name", id.Name, by)})
		return "", nil, false
	}
	return id.Name, id.Roles(), true
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	id := IdentityOf(r.Context())
	out := api.Whoami{Name: id.Name, Kind: id.Kind, Roles: id.Roles(), Permissions: []string{}}
	for _, g := range id.Grants {
		for _, p := range g.Playbooks {
			if !slices.Contains(out.Playbooks, p) {
				out.Playbooks = append(out.Playbooks, p)
			}
		}
	}
	for _, p := range id.Permissions() {
		out.Permissions = append(out.Permissions, string(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	toks, err := s.store.Tokens(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.TokenList{Tokens: []api.Token{}}
	for _, t := range toks {
		out.Tokens = append(out.Tokens, api.ViewToken(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var body api.TokenRequest
	if !decodeBody(w, r, &body) {
		return
	}
	authzOf(r).target = "token:" + body.Name
	noteAudit(r, "roles", body.Roles)
	if len(body.Playbooks) > 0 {
		noteAudit(r, "playbooks", body.Playbooks)
	}
	ttl, ttlErr := auth.ParseTTL(body.TTL)
	var problems []string
	for _, err := range []error{auth.CheckName(body.Name), auth.CheckRoles(body.Roles), auth.CheckPatterns(body.Playbooks), ttlErr} {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		writeError(w, http.StatusBadRequest, fault.Invalid, "token refused", problems...)
		return
	}
	for _, u := range s.o.Auth.Users {
		if u.Name == body.Name {
			writeError(w, http.StatusConflict, fault.Conflict, fmt.Sprintf("%s is a user of the config (auth.users); choose another token name", body.Name))
			return
		}
	}
	secret, err := auth.NewToken()
	if err != nil {
		writeErr(w, err)
		return
	}
	t := state.Token{Name: body.Name, Hash: auth.HashToken(secret), Roles: body.Roles, Playbooks: body.Playbooks,
		CreatedAt: time.Now().UTC(), CreatedBy: callerName(r)}
	if ttl > 0 {
		t.ExpiresAt = t.CreatedAt.Add(ttl)
		noteAudit(r, "expires_at", t.ExpiresAt.Format(time.RFC3339))
	}
	if err := s.store.CreateToken(r.Context(), t); err != nil {
		if errors.Is(err, state.ErrExists) {
			writeError(w, http.StatusConflict, fault.Conflict, fmt.Sprintf("a token named %s exists; revoke it first (runbook token revoke %s)", body.Name, body.Name))
			return
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.TokenCreated{Token: api.ViewToken(t), Secret: secret})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.store.RevokeToken(r.Context(), name, time.Now().UTC(), callerName(r))
	if errors.Is(err, state.ErrNotFound) {
		writeError(w, http.StatusNotFound, fault.NotFound, fmt.Sprintf("no live token %q (runbook token list)", name))
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) readAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := state.AuditFilter{Limit: 1000}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fault.Invalid, "since must be an RFC 3339 time (2026-11-02T15:04:05Z)")
			return
		}
		f.Since = t
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fault.Invalid, "after must be an audit sequence number")
			return
		}
		f.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, fault.Invalid, "limit must be an integer in 1..10000")
			return
		}
		f.Limit = n
	}
	recs, err := s.store.Audit(r.Context(), f)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.AuditPage{Records: recs}
	if out.Records == nil {
		out.Records = []state.AuditRecord{}
	}
	if len(recs) == f.Limit {
		out.Next = recs[len(recs)-1].Seq
	}
	writeJSON(w, http.StatusOK, out)
}
