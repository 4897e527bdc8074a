package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/ui"
)

// uiMount is what the web UI adds to the server: the API endpoints it
// reads (documented in docs/api.md with the rest), the log of webhook
// deliveries, and the UI itself at /.
type uiMount struct {
	s          *Server
	deliveries *deliveryLog
}

// withUI mounts the web UI over core (the API, webhooks, /healthz and
// /metrics): the UI answers every path core does not own, and calls the
// API in process.
func (s *Server) withUI(core http.Handler) http.Handler {
	m := &uiMount{s: s, deliveries: newDeliveryLog()}
	routes := map[string]http.HandlerFunc{
		"GET /api/v1/runs/page":                   s.listRuns, // an alias of GET /api/v1/runs for the first release (docs/api.md)
		"GET /api/v1/runs/{id}/definition":        s.runDefinition,
		"GET /api/v1/playbooks/{name}/definition": s.playbookDefinition,
		"GET /api/v1/deliveries":                  m.listDeliveries,
		"GET /api/v1/schedules":                   s.listSchedules,
		"GET /api/v1/history":                     s.listHistory,
		"GET /api/v1/changes":                     s.streamChanges,
	}
	// The routes go through the API's authentication as one mux, so that
	// it sees each request's pattern as it does the others'.
	own := http.NewServeMux()
	for pattern, h := range routes {
		own.HandleFunc(pattern, h)
	}
	authed := s.authenticate(own)
	apiMux := http.NewServeMux()
	for pattern := range routes {
		apiMux.Handle(pattern, authed)
	}
	apiMux.Handle("/hooks/", m.recordDeliveries(core))
	apiMux.Handle("/", core)

	web, err := ui.New(ui.Options{API: apiMux, Identify: s.identify, Recheck: s.recheck,
		Sessions: s.store, OIDC: s.oidcLogin(), Logger: s.log})
	if err != nil {
		// The UI's templates and assets are embedded: only a broken build
		// fails here, and its tests fail first.
		panic(err)
	}
	root := http.NewServeMux()
	for _, p := range []string{"/api/", "/hooks/", "/healthz", "/readyz", "/metrics"} {
		root.Handle(p, apiMux)
	}
	root.Handle("/", web)
	return root
}

// identify is who an API token belongs to, for the UI's sign-in: the
// API's own authentication, with the identity's roles as the actions the
// UI may offer. The server token names no one (its holder says who they
// are at sign-in, as `by` with the API).
func (s *Server) identify(ctx context.Context, token string) (ui.Identity, error) {
	if !s.apiEnabled(ctx) {
		return ui.Identity{}, errors.New("the API is disabled: the server has no API token and no users (set the secret named by server.token_secret, RUNBOOK_API_TOKEN by default, or configure auth.users), so nobody can sign in")
	}
	id, err := s.authn.Authenticate(ctx, token)
	if errors.Is(err, auth.ErrInvalidToken) {
		return ui.Identity{}, ui.ErrBadToken
	}
	if err != nil {
		s.log.Error("ui sign-in: the token cannot be checked", "err", err)
		return ui.Identity{}, errors.New("the token cannot be checked now; try again")
	}
	return s.uiIdentity(id), nil
}

// uiIdentity is an identity as the UI sees it: what it may do is judged
// by the API's own rules (roles, playbook patterns and labels), so the UI
// offers exactly what the API would accept.
func (s *Server) uiIdentity(id *auth.Identity) ui.Identity {
	out := ui.Identity{Perms: identityPerms{id: id, labels: s.labelsOf}}
	if id.Kind != auth.KindServer {
		out.Name = id.Name
	}
	return out
}

// identityPerms are an identity's permissions, as ui.Permissions. The
// UI's actions are named as the API's permissions.
type identityPerms struct {
	id     *auth.Identity
	labels func(playbook string) map[string]string
}

func (p identityPerms) Allows(a ui.Action, playbook string) bool {
	pb := auth.Playbook{Name: playbook}
	if playbook != "" {
		pb.Labels = p.labels(playbook)
	}
	return p.id.CanOn(auth.Permission(a), pb)
}

func (p identityPerms) AllowsAny(a ui.Action) bool { return p.id.CanSome(auth.Permission(a)) }
