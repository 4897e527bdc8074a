package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/ui"
)

// AuthOptions configure who may use the API besides the holder of
// Options.Token (admin).
type AuthOptions struct {
	Users []auth.User        // auth.users of the config
	OIDC  *auth.OIDCVerifier // nil: no OIDC bearer tokens
	// AuditRetention prunes audit records older than this, hourly (0:
	// they are kept for good).
	AuditRetention time.Duration
	// Now is the clock that expires tokens (tests; default time.Now).
	Now func() time.Time
}

// route is what a pattern of the API requires: a permission and, for a
// state-changing route, the action its audit record names.
type route struct {
	perm   auth.Permission // "": any authenticated caller
	action string          // "": not audited (reads)
}

// routePerms lists the permission of every API route. A route missing
// here (added later) needs runs.read to be read and admin to be changed.
var routePerms = map[string]route{
	"GET /api/v1/playbooks":                            {perm: auth.ReadPlaybooks},
	"GET /api/v1/playbooks/{name}":                     {perm: auth.ReadPlaybooks},
	"POST /api/v1/playbooks/{name}/runs":               {perm: auth.StartRuns, action: "run.start"},
	"GET /api/v1/runs":                                 {perm: auth.ReadRuns},
	"GET /api/v1/runs/{id}":                            {perm: auth.ReadRuns},
	"GET /api/v1/runs/{id}/events":                     {perm: auth.ReadRuns},
	"GET /api/v1/runs/{id}/logs":                       {perm: auth.ReadRuns},
	"GET /api/v1/runs/{id}/output":                     {perm: auth.ReadRuns},
	"POST /api/v1/runs/{id}/cancel":                    {perm: auth.CancelRuns, action: "run.cancel"},
	"POST /api/v1/runs/{id}/approve":                   {perm: auth.ApproveRuns, action: "run.approve"},
	"POST /api/v1/runs/{id}/retry":                     {perm: auth.RetryRuns, action: "run.retry"},
	"POST /api/v1/runs/{id}/resume":                    {perm: auth.ResumeRuns, action: "run.resume"},
	"POST /api/v1/runs/{id}/rerun":                     {perm: auth.StartRuns, action: "run.rerun"},
	"POST /api/v1/reload":                              {perm: auth.Reload, action: "server.reload"},
	"GET /api/v1/pauses":                               {perm: auth.ReadRuns},
	"POST /api/v1/pauses":                              {perm: auth.PauseRuns, action: "runs.pause"},
	"DELETE /api/v1/pauses/{id}":                       {perm: auth.PauseRuns, action: "runs.unpause"},
	"GET /api/v1/drain":                                {perm: auth.ReadRuns},
	"POST /api/v1/drain":                               {perm: auth.Admin, action: "server.drain"},
	"GET /api/v1/whoami":                               {},
	"GET /api/v1/tokens":                               {perm: auth.ManageTokens},
	"POST /api/v1/tokens":                              {perm: auth.ManageTokens, action: "token.create"},
	"DELETE /api/v1/tokens/{name}":                     {perm: auth.ManageTokens, action: "token.revoke"},
	"GET /api/v1/audit":                                {perm: auth.ReadAudit},
	"GET /api/v1/notifications":                        {perm: auth.ReadRuns},
	"GET /api/v1/state/backup":                         {perm: auth.Admin, action: "state.backup"},
	"POST /api/v1/playbooks/{name}/schedules/pause":    {perm: auth.PauseSchedules, action: "schedule.pause"},
	"POST /api/v1/playbooks/{name}/schedules/resume":   {perm: auth.PauseSchedules, action: "schedule.resume"},
	"POST /api/v1/playbooks/{name}/schedules/run":      {perm: auth.StartRuns, action: "schedule.run"},
	"POST /api/v1/playbooks/{name}/schedules/backfill": {perm: auth.StartRuns, action: "schedule.backfill"},
	// The agents' protocol (api_agents.go) and their listing.
	"POST /api/v1/agent/register":                {perm: auth.WorkAsAgent, action: "agent.register"},
	"POST /api/v1/agent/poll":                    {perm: auth.WorkAsAgent},
	"POST /api/v1/agent/assignments/{id}/lines":  {perm: auth.WorkAsAgent},
	"POST /api/v1/agent/assignments/{id}/host":   {perm: auth.WorkAsAgent},
	"POST /api/v1/agent/assignments/{id}/result": {perm: auth.WorkAsAgent},
	"GET /api/v1/agents":                         {perm: auth.ReadRuns},
	// The web UI's reads (internal/server/ui.go).
	"GET /api/v1/runs/page":                   {perm: auth.ReadRuns},
	"GET /api/v1/runs/{id}/definition":        {perm: auth.ReadRuns},
	"GET /api/v1/playbooks/{name}/definition": {perm: auth.ReadPlaybooks},
	"GET /api/v1/deliveries":                  {perm: auth.ReadRuns},
	"GET /api/v1/schedules":                   {perm: auth.ReadPlaybooks},
	"/api/":                                   {}, // the 404 of unknown routes
}

// routeOf returns what the request's route requires.
func routeOf(r *http.Request, pattern string) route {
	if rt, ok := routePerms[pattern]; ok {
		return rt
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return route{perm: auth.ReadRuns}
	}
	return route{perm: auth.Admin, action: strings.ToLower(r.Method) + " " + pattern}
}

type authzKey struct{}

// authz is what the middleware learned about a request: who calls, the
// permission its route requires, and notes for its audit record.
type authz struct {
	id     *auth.Identity
	perm   auth.Permission
	target string
	detail map[string]any
	labels func(playbook string) map[string]string // a loaded playbook's labels
}

// can reports whether the caller may do the route's permission on the
// playbook named playbook, its labels included.
func (az *authz) can(playbook string) bool {
	pb := auth.Playbook{Name: playbook}
	if az.labels != nil && playbook != "" {
		pb.Labels = az.labels(playbook)
	}
	return az.id.CanOn(az.perm, pb)
}

// labelsOf returns the labels of a loaded playbook (none when it is not
// loaded: a run of a removed playbook is judged by its name).
func (s *Server) labelsOf(playbook string) map[string]string {
	if pb := s.cat.get(playbook); pb != nil {
		return pb.Labels
	}
	return nil
}

func authzOf(r *http.Request) *authz {
	a, _ := r.Context().Value(authzKey{}).(*authz)
	return a
}

// IdentityOf returns the identity the API middleware authenticated for a
// request (nil outside the API).
func IdentityOf(ctx context.Context) *auth.Identity {
	if a, _ := ctx.Value(authzKey{}).(*authz); a != nil {
		return a.id
	}
	return nil
}

// Authenticator returns who a bearer token belongs to; the web UI uses it
// to check a login (see auth.Authenticator.Authenticate).
func (s *Server) Authenticator() *auth.Authenticator { return s.authn }

// noteAudit adds a detail to the request's audit record.
func noteAudit(r *http.Request, key string, val any) {
	if a := authzOf(r); a != nil {
		if a.detail == nil {
			a.detail = map[string]any{}
		}
		a.detail[key] = val
	}
}

// bearer returns the request's bearer token, "" when there is none.
func bearer(r *http.Request) (string, bool) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	// The scheme is case-insensitive (RFC 9110 section 11.1).
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// authenticate finds the caller's identity, checks that its route allows
// it at all (the handlers check the playbook), and audits what changes
// state.
func (s *Server) authenticate(next http.Handler) http.Handler {
	mux, _ := next.(*http.ServeMux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.apiEnabled(r.Context()) {
			writeError(w, http.StatusServiceUnavailable, fault.Unavailable, "the API is disabled: the server has no API token (set the secret named by server.token_secret, RUNBOOK_API_TOKEN by default, or configure auth.users)")
			return
		}
		var id *auth.Identity
		var err error
		if src, ok := ui.SourceOf(r.Context()); ok { // the web UI, in process
			id, err = s.sourceIdentity(r.Context(), src)
		} else {
			tok, ok := bearer(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="runbook"`)
				writeError(w, http.StatusUnauthorized, fault.Unauthorized, "missing bearer token: send Authorization: Bearer TOKEN")
				return
			}
			id, err = s.authn.Authenticate(r.Context(), tok)
		}
		if err != nil {
			if !errors.Is(err, auth.ErrInvalidToken) {
				s.log.Error("authentication failed", "err", err)
				writeError(w, http.StatusServiceUnavailable, fault.Unavailable, "cannot check the token now; try again")
				return
			}
			s.auditExpired(r, err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="runbook", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, fault.Unauthorized, err.Error())
			return
		}
		authenticated(r.Context())
		pattern := r.Pattern // set when an outer mux routed here
		if mux != nil {
			_, pattern = mux.Handler(r)
		}
		rt := routeOf(r, pattern)
		az := &authz{id: id, perm: rt.perm, labels: s.labelsOf}
		r = r.WithContext(context.WithValue(r.Context(), authzKey{}, az))
		pb := playbookOfPath(pattern, r.URL.Path)
		switch {
		case rt.perm != "" && !id.CanSome(rt.perm):
			s.forbid(w, r, rt.perm, "")
		case rt.perm != "" && pb != "" && !az.can(pb):
			s.forbid(w, r, rt.perm, pb)
		default:
			rec := &auditRecorder{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(rec, r)
			if rt.action != "" {
				s.auditRequest(r, az, pattern, rt.action, rec.status)
			}
			return
		}
		if rt.action != "" {
			s.auditRequest(r, az, pattern, rt.action, http.StatusForbidden)
		}
	})
}

// auditTimeout records an approval that its timeout answered: the audit
// log then holds every answer of an approval, a person's or the clock's.
func (s *Server) auditTimeout(runID string, ev state.Event) {
	if ev.Type != "approval.timed_out" {
		return
	}
	s.audit(context.Background(), state.AuditRecord{
		Identity: "system:timeout", Action: "run.approve", Target: "run:" + runID, Result: string(fault.Timeout),
		Source: "runbook", Detail: map[string]any{"step": ev.Step},
	})
}

// pathValue returns the segment of path that the wildcard {key} of the
// route pattern ("POST /api/v1/runs/{id}/cancel") stands for, "" when the
// pattern has none. It needs no routing: a request refused before its
// route ran is read the same way.
func pathValue(pattern, path, key string) string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	want, got := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, seg := range want {
		if seg == "{"+key+"}" && i < len(got) {
			return got[i]
		}
	}
	return ""
}

// targetOfPath names what a request is about: run:ID, playbook:NAME or
// token:NAME.
func targetOfPath(pattern, path string) string {
	if id, ok := strings.CutPrefix(path, "/api/v1/pauses/"); ok && id != "" {
		return "pause:" + id
	}
	if id := pathValue(pattern, path, "id"); id != "" {
		return "run:" + id
	}
	name := pathValue(pattern, path, "name")
	switch {
	case name == "":
		return ""
	case strings.HasPrefix(path, "/api/v1/playbooks/"):
		return "playbook:" + name
	}
	return "token:" + name
}

// playbookOfPath returns the playbook a route under
// /api/v1/playbooks/{name} is about, "" for other routes.
func playbookOfPath(pattern, path string) string {
	if !strings.HasPrefix(path, "/api/v1/playbooks/") {
		return ""
	}
	return pathValue(pattern, path, "name")
}

// forbid answers 403 naming the permission the caller lacks.
func (s *Server) forbid(w http.ResponseWriter, r *http.Request, perm auth.Permission, playbook string) {
	id := IdentityOf(r.Context())
	msg := fmt.Sprintf("%s may not %s: the permission %s is needed", id.Name, perm, perm)
	if playbook != "" {
		msg = fmt.Sprintf("%s may not %s on playbook %s: the permission %s on it is needed", id.Name, perm, playbook, perm)
	}
	writeJSON(w, http.StatusForbidden, api.ErrorBody{Error: msg, Code: string(fault.Unauthorized), Permission: string(perm)})
}

// inScope checks the route's permission on playbook and answers 403 when
// the caller lacks it there.
func (s *Server) inScope(w http.ResponseWriter, r *http.Request, playbook string) bool {
	az := authzOf(r)
	if az == nil || az.perm == "" || az.can(playbook) {
		return true
	}
	s.forbid(w, r, az.perm, playbook)
	return false
}

// visible reports whether the caller may see playbook's items in a
// listing.
func visible(r *http.Request, playbook string) bool {
	az := authzOf(r)
	return az == nil || az.perm == "" || az.can(playbook)
}

// auditRequest appends the audit record of a state-changing request.
func (s *Server) auditRequest(r *http.Request, az *authz, pattern, action string, status int) {
	target := az.target
	if target == "" {
		target = targetOfPath(pattern, r.URL.Path)
	}
	s.audit(r.Context(), state.AuditRecord{
		Identity: az.id.Name, Action: action, Target: target, Result: resultOf(status),
		Source: r.RemoteAddr, Detail: az.detail,
	})
}

// resultOf names the outcome of an answer with status.
func resultOf(status int) string {
	switch {
	case status/100 == 2:
		return "ok"
	case status == http.StatusForbidden:
		return "denied"
	}
	return string(fault.CodeForHTTPStatus(status))
}

// audit appends rec to the audit log; a failure is logged (the action it
// records has happened).
// auditExpired records the refusal of an expired token: its holder, or
// whoever took it, is still trying.
func (s *Server) auditExpired(r *http.Request, err error) {
	var ee *auth.ExpiredError
	if !errors.As(err, &ee) {
		return
	}
	s.audit(r.Context(), state.AuditRecord{Identity: ee.Name, Action: "token.expired", Target: "token:" + ee.Name,
		Result: string(fault.Unauthorized), Source: r.RemoteAddr,
		Detail: map[string]any{"expired_at": ee.At.UTC().Format(time.RFC3339), "request": r.Method + " " + r.URL.Path}})
}

func (s *Server) audit(ctx context.Context, rec state.AuditRecord) {
	if err := s.store.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		s.log.Error("audit record not written", "action", rec.Action, "identity", rec.Identity, "err", err)
	}
}

// pruneAudit deletes audit records older than the retention, now and
// then hourly, until ctx ends.
func (s *Server) pruneAudit(ctx context.Context) {
	if s.o.Auth.AuditRetention <= 0 {
		return
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		n, err := s.store.PruneAudit(ctx, time.Now().Add(-s.o.Auth.AuditRetention))
		if err != nil && ctx.Err() == nil {
			s.log.Warn("audit pruning failed", "err", err)
		} else if n > 0 {
			s.log.Info("audit records pruned", "records", n, "retention", s.o.Auth.AuditRetention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// newAuthenticator builds the server's authenticator from its options.
func newAuthenticator(o Options, store state.Store) (*auth.Authenticator, error) {
	return auth.New(auth.Options{ServerToken: o.Token, Users: o.Auth.Users, OIDC: o.Auth.OIDC, Tokens: store, Log: o.Logger, Now: o.Auth.Now})
}

// apiEnabled reports whether anyone can use the API: a server token,
// configured users or OIDC, or a live token in the store.
func (s *Server) apiEnabled(ctx context.Context) bool {
	if s.authn.Enabled() {
		return true
	}
	toks, err := s.store.Tokens(ctx)
	if err != nil {
		return true // let Authenticate report the store's trouble
	}
	for _, t := range toks {
		if t.RevokedAt.IsZero() {
			return true
		}
	}
	return false
}

// auditRecorder keeps the status of an answer for its audit record; it
// flushes (the log stream) and unwraps like the writer it wraps.
type auditRecorder struct {
	http.ResponseWriter
	status int
}

func (a *auditRecorder) WriteHeader(code int) {
	a.status = code
	a.ResponseWriter.WriteHeader(code)
}

func (a *auditRecorder) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (a *auditRecorder) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// APIRoutes lists the patterns of the API's routes with a permission, for
// the permission matrix test.
func APIRoutes() []string {
	var out []string
	for p := range routePerms {
		if p != "/api/" {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
