package network

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/identity"
)

func init() {
	sim.Register("network", func(env *sim.Env) (sim.Service, error) { return newService(env, "network"), nil })
	sim.Register("image", func(env *sim.Env) (sim.Service, error) { return newService(env, "image"), nil })
}

// Service is the simulated network API or image API (kind).
type Service struct {
	env    *sim.Env
	kind   string
	world  *World
	tokens *identity.Store
	token  string
	// also is the cluster simulator's static token, accepted too: the
	// network lookups use the cluster connection, and on the real service
	// one identity token serves every API of the tenant.
	also string
}

var _ sim.Service = (*Service)(nil)

func newService(env *sim.Env, kind string) *Service {
	return &Service{env: env, kind: kind, world: For(env), tokens: identity.For(env),
		token: fmt.Sprintf("sim-%s-token-%d", kind, env.Seed), also: fmt.Sprintf("sim-nks-token-%d", env.Seed)}
}

// World returns the networks, subnets and images the service answers.
func (s *Service) World() *World { return s.world }

// Token returns the static token the service accepts besides identity tokens.
func (s *Service) Token() string { return s.token }

// Connection returns base_url, region and a token the service accepts, plus
// the identity settings when identity runs on the same server.
func (s *Service) Connection(baseURL string) map[string]any {
	out := map[string]any{"base_url": baseURL, "region": Region, "token": s.token}
	if s.env.URL != nil {
		if u := s.env.URL("identity"); u != "" {
			c := s.tokens.Credentials()
			out["identity_url"], out["tenant_id"], out["username"], out["password"] = u, c.TenantID, c.Username, c.Password
		}
	}
	return out
}

// Handler serves the network API (/v2.0/networks, /v2.0/subnets and the
// admin routes) or the image API (/v2/images).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.kind == "image" {
		mux.Handle("GET /v2/images", s.guard(s.listImages))
		mux.Handle("GET /v2/images/{id}", s.guard(s.getImage))
	} else {
		mux.Handle("GET /v2.0/networks", s.guard(s.listNetworks))
		mux.Handle("GET /v2.0/networks/{id}", s.guard(s.getNetwork))
		mux.Handle("GET /v2.0/subnets", s.guard(s.listSubnets))
		mux.Handle("GET /v2.0/subnets/{id}", s.guard(s.getSubnet))
		mux.HandleFunc("POST /_admin/networks", s.adminNetwork)
		mux.HandleFunc("POST /_admin/subnets", s.adminSubnet)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.notFound(w, "Resource", r.URL.Path)
	})
	return mux
}

func (s *Service) guard(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("X-Auth-Token")
		if tok == "" || (tok != s.token && tok != s.also && !s.tokens.Valid(tok)) {
			sim.WriteJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
				"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}})
			return
		}
		h(w, r)
	})
}

func (s *Service) notFound(w http.ResponseWriter, what, id string) {
	if s.kind == "image" {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "404 Not Found\n\nNo %s found with ID %s\n\n", strings.ToLower(what), id)
		return
	}
	sim.WriteJSON(w, http.StatusNotFound, map[string]any{"NeutronError": map[string]any{
		"type": what + "NotFound", "message": fmt.Sprintf("%s %s could not be found.", what, id), "detail": ""}})
}

// match reports whether v is one of the filter's values (no filter: any).
// Booleans compare without case (router:external=True).
func match(q url.Values, key, v string) bool {
	want, ok := q[key]
	if !ok {
		return true
	}
	for _, x := range want {
		if x == v || strings.EqualFold(x, v) && (v == "true" || v == "false") {
			return true
		}
	}
	return false
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func (s *Service) networkView(n Network) map[string]any {
	subnets := n.Subnets
	if subnets == nil {
		subnets = []string{}
	}
	return map[string]any{
		"id": n.ID, "name": n.Name, "status": "ACTIVE", "admin_state_up": true, "subnets": subnets,
		"router:external": n.External, "shared": n.Shared, "tenant_id": s.world.Tenant, "project_id": s.world.Tenant,
	}
}

func (s *Service) subnetView(sn Subnet) map[string]any {
	return map[string]any{
		"id": sn.ID, "name": sn.Name, "network_id": sn.NetworkID, "cidr": sn.CIDR, "gateway_ip": sn.GatewayIP,
		"ip_version": 4, "enable_dhcp": true, "tenant_id": s.world.Tenant, "project_id": s.world.Tenant,
	}
}

// GET /v2.0/networks
func (s *Service) listNetworks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := []map[string]any{}
	for _, n := range s.world.Networks() {
		if match(q, "id", n.ID) && match(q, "name", n.Name) && match(q, "router:external", boolStr(n.External)) &&
			match(q, "shared", boolStr(n.Shared)) && match(q, "tenant_id", s.world.Tenant) && match(q, "status", "ACTIVE") {
			out = append(out, s.networkView(n))
		}
	}
	sim.WriteJSON(w, http.StatusOK, map[string]any{"networks": out})
}

// GET /v2.0/networks/{id}
func (s *Service) getNetwork(w http.ResponseWriter, r *http.Request) {
	n, ok := s.world.Network(r.PathValue("id"))
	if !ok {
		s.notFound(w, "Network", r.PathValue("id"))
		return
	}
	sim.WriteJSON(w, http.StatusOK, map[string]any{"network": s.networkView(n)})
}

// GET /v2.0/subnets
func (s *Service) listSubnets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := []map[string]any{}
	for _, sn := range s.world.Subnets() {
		if match(q, "id", sn.ID) && match(q, "name", sn.Name) && match(q, "network_id", sn.NetworkID) && match(q, "cidr", sn.CIDR) {
			out = append(out, s.subnetView(sn))
		}
	}
	sim.WriteJSON(w, http.StatusOK, map[string]any{"subnets": out})
}

// GET /v2.0/subnets/{id}
func (s *Service) getSubnet(w http.ResponseWriter, r *http.Request) {
	sn, ok := s.world.Subnet(r.PathValue("id"))
	if !ok {
		s.notFound(w, "Subnet", r.PathValue("id"))
		return
	}
	sim.WriteJSON(w, http.StatusOK, map[string]any{"subnet": s.subnetView(sn)})
}

func (s *Service) imageView(i Image) map[string]any {
	return map[string]any{
		"id": i.ID, "name": i.Name, "status": "active", "visibility": "public", "container_format": "bare",
		"disk_format": "qcow2", "min_disk": 20, "min_ram": 0, "self": "/v2/images/" + i.ID, "schema": "/v2/schemas/image",
	}
}

// GET /v2/images
func (s *Service) listImages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := []map[string]any{}
	for _, i := range s.world.Images() {
		if match(q, "id", i.ID) && match(q, "name", i.Name) && match(q, "visibility", "public") && match(q, "status", "active") {
			out = append(out, s.imageView(i))
		}
	}
	sim.WriteJSON(w, http.StatusOK, map[string]any{"images": out, "first": "/v2/images", "schema": "/v2/schemas/images"})
}

// GET /v2/images/{id}
func (s *Service) getImage(w http.ResponseWriter, r *http.Request) {
	i, ok := s.world.Image(r.PathValue("id"))
	if !ok {
		s.notFound(w, "Image", r.PathValue("id"))
		return
	}
	sim.WriteJSON(w, http.StatusOK, s.imageView(i))
}

// POST /_admin/networks {"id","name","router:external","shared"}
func (s *Service) adminNetwork(w http.ResponseWriter, r *http.Request) {
	var n Network
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&n); err != nil || n.ID == "" {
		sim.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("want {\"id\", \"name\", \"router:external\", \"shared\"} (%v)", err)})
		return
	}
	s.world.AddNetwork(n)
	w.WriteHeader(http.StatusNoContent)
}

// POST /_admin/subnets {"id","name","network_id","cidr","gateway_ip"}
func (s *Service) adminSubnet(w http.ResponseWriter, r *http.Request) {
	var sn Subnet
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&sn); err != nil || sn.ID == "" {
		sim.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("want {\"id\", \"name\", \"network_id\", \"cidr\"} (%v)", err)})
		return
	}
	if err := s.world.AddSubnet(sn); err != nil {
		sim.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
