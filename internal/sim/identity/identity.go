package identity

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/sim"
)

func init() { sim.Register("identity", New) }

// Region is the region name of the catalog's endpoints.
const Region = "KR1"

// Service is the simulated identity endpoint.
type Service struct {
	env   *sim.Env
	store *Store
}

var _ sim.Service = (*Service)(nil)

// New creates the identity service of env's server.
func New(env *sim.Env) (sim.Service, error) {
	return &Service{env: env, store: For(env)}, nil
}

// Store returns the token store (for in-process tests).
func (s *Service) Store() *Store { return s.store }

// Connection returns the identity URL and the credentials it accepts.
func (s *Service) Connection(baseURL string) map[string]any {
	c := s.store.Credentials()
	return map[string]any{"identity_url": baseURL, "tenant_id": c.TenantID, "username": c.Username, "password": c.Password}
}

// Handler serves POST /v2.0/tokens and the admin routes.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2.0/tokens", s.tokens)
	mux.HandleFunc("POST /_admin/lifetime", s.adminLifetime)
	mux.HandleFunc("POST /_admin/revoke", func(w http.ResponseWriter, r *http.Request) {
		s.store.Revoke()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found", "The resource could not be found.")
	})
	return mux
}

type tokenRequest struct {
	Auth struct {
		TenantID            string `json:"tenantId"`
		PasswordCredentials struct {
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"passwordCredentials"`
	} `json:"auth"`
}

func (s *Service) tokens(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request", "Malformed request body: "+err.Error())
		return
	}
	a := req.Auth
	if a.TenantID == "" || a.PasswordCredentials.Username == "" || a.PasswordCredentials.Password == "" {
		writeError(w, http.StatusBadRequest, "Bad Request",
			"Expecting to find auth.tenantId, auth.passwordCredentials.username and auth.passwordCredentials.password in the request body.")
		return
	}
	id, expires, ok := s.store.Issue(Credentials{TenantID: a.TenantID, Username: a.PasswordCredentials.Username, Password: a.PasswordCredentials.Password})
	if !ok {
		writeError(w, http.StatusUnauthorized, "Unauthorized", "The request you have made requires authentication.")
		return
	}
	now := s.env.Clock.Now().UTC()
	c := s.store.Credentials()
	catalog := s.catalog(c.TenantID)
	sim.WriteJSON(w, http.StatusOK, map[string]any{"access": map[string]any{
		"token": map[string]any{
			"id":        id,
			"issued_at": now.Format("2006-01-02T15:04:05.000000Z"),
			"expires":   expires.Format(time.RFC3339),
			"tenant":    map[string]any{"id": c.TenantID, "name": c.TenantID, "enabled": true, "description": nil},
		},
		"serviceCatalog": catalog,
		"user": map[string]any{
			"id": "sim-user", "name": c.Username, "username": c.Username,
			"roles": []map[string]any{{"name": "_member_"}}, "roles_links": []any{},
		},
		"metadata": map[string]any{"is_admin": 0, "roles": []string{}},
	}})
}

// catalogEntries are the service catalog's entries: type, name, the
// simulated service that serves it and the path its endpoint adds to that
// service's URL ({tenant} is replaced). Public clients join their
// resource paths to the endpoint, so each carries the version the client
// expects there: Magnum's container-infra endpoint ends in /v1
// (python-magnumclient and gophercloud append "clusters"), Neutron's and
// Glance's are unversioned (clients append /v2.0/networks, /v2/images),
// Swift's is the account URL. "kubernetes" is the type name NHN Cloud's
// API guide gives the cluster API's unversioned host.
var catalogEntries = []struct{ typ, name, service, path string }{
	{"container-infra", "nks", "nks", "/v1"},
	{"kubernetes", "nks", "nks", ""},
	{"network", "neutron", "network", ""},
	{"image", "glance", "image", ""},
	{"object-store", "swift", "objectstorage", "/v1/AUTH_{tenant}"},
	{"identity", "keystone", "identity", "/v2.0"},
}

// catalog lists, in the Keystone v2 shape, the entries whose service runs
// on the same server.
func (s *Service) catalog(tenant string) []map[string]any {
	out := []map[string]any{}
	if s.env.URL == nil {
		return out
	}
	for _, e := range catalogEntries {
		u := s.env.URL(e.service)
		if u == "" {
			continue
		}
		u += strings.ReplaceAll(e.path, "{tenant}", tenant)
		out = append(out, map[string]any{
			"type": e.typ, "name": e.name,
			"endpoints":       []map[string]any{{"region": Region, "publicURL": u, "internalURL": u, "adminURL": u}},
			"endpoints_links": []any{},
		})
	}
	return out
}

func (s *Service) adminLifetime(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Lifetime string `json:"lifetime"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request", err.Error())
		return
	}
	d, err := time.ParseDuration(body.Lifetime)
	if err != nil || d <= 0 {
		writeError(w, http.StatusBadRequest, "Bad Request", "lifetime must be a positive duration like 30m")
		return
	}
	s.store.SetLifetime(d)
	w.WriteHeader(http.StatusNoContent)
}

// writeError writes the Keystone error body.
func writeError(w http.ResponseWriter, status int, title, message string) {
	sim.WriteJSON(w, status, map[string]any{"error": map[string]any{"code": status, "title": title, "message": message}})
}
