package nks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/identity"
	"github.com/runbook/runbook/internal/sim/network"
)

func init() { sim.Register("nks", New) }

// DefaultDurations are the simulated durations of each task type.
var DefaultDurations = map[string]time.Duration{
	"CLUSTER_CREATE":                   10 * time.Minute,
	"CLUSTER_DELETE":                   5 * time.Minute,
	"CLUSTER_RESIZE":                   2 * time.Minute,
	"CLUSTER_CNI_UPDATE":               10 * time.Minute,
	"CLUSTER_API_EP_IPACL_UPDATE":      time.Minute,
	"NODEGROUP_CREATE":                 5 * time.Minute,
	"NODEGROUP_DELETE":                 3 * time.Minute,
	"NODEGROUP_UPGRADE":                5 * time.Minute,
	"NODEGROUP_UPDATE_FLAVOR":          5 * time.Minute,
	"NODEGROUP_USERSCRIPT_UPDATE":      2 * time.Minute,
	"NODEGROUP_SET_CLUSTER_AUTOSCALER": time.Minute,
	"NODEGROUP_NODE_ACTION_NODE_START": time.Minute,
	"NODEGROUP_NODE_ACTION_NODE_STOP":  time.Minute,
}

// Failure makes the next task matching Operation (a task type such as
// NODEGROUP_UPGRADE), and Cluster / Nodegroup when set (name or UUID), end
// in FAIL with Contents.
type Failure struct {
	Operation string `json:"operation"`
	Cluster   string `json:"cluster,omitempty"`
	Nodegroup string `json:"nodegroup,omitempty"`
	Contents  string `json:"contents"`
	// After lets this many matching tasks succeed first: the rule fails the
	// next one after them (After 2: the third upgrade of the group fails).
	After int `json:"after,omitempty"`
}

// Service is the simulated cluster API.
type Service struct {
	env    *sim.Env
	tokens *identity.Store
	world  *network.World // the networks, subnets and images creates refer to
	token  string         // the static token Connection hands out
	region string

	mu        sync.Mutex
	rnd       *rand.Rand
	clusters  []*cluster
	pending   []*task
	taskSeq   int
	durations map[string]time.Duration
	failNext  []Failure
	versions  []version
	subnets   map[string]netip.Prefix
}

var _ sim.Service = (*Service)(nil)

// New creates the cluster API simulator of env's server.
func New(env *sim.Env) (sim.Service, error) {
	s := &Service{
		env:       env,
		tokens:    identity.For(env),
		world:     network.For(env),
		token:     fmt.Sprintf("sim-nks-token-%d", env.Seed),
		region:    "kr1",
		rnd:       rand.New(rand.NewPCG(env.Seed, 0x6e6b73)),
		durations: map[string]time.Duration{},
		versions:  defaultVersions(),
		subnets:   map[string]netip.Prefix{},
	}
	for k, v := range DefaultDurations {
		s.durations[k] = v
	}
	return s, nil
}

// Token returns the static token the service accepts besides identity tokens.
func (s *Service) Token() string { return s.token }

// Connection returns the base URL, region and a token the service accepts,
// plus the identity settings when identity runs on the same server.
func (s *Service) Connection(baseURL string) map[string]any {
	out := map[string]any{"base_url": baseURL, "region": s.region, "token": s.token}
	if s.env.URL != nil {
		if u := s.env.URL("identity"); u != "" {
			c := s.tokens.Credentials()
			out["identity_url"], out["tenant_id"], out["username"], out["password"] = u, c.TenantID, c.Username, c.Password
		}
		// The network and image lookups use the cluster connection's
		// credentials at their own endpoints (network.* steps).
		for _, svc := range []string{"network", "image"} {
			if u := s.env.URL(svc); u != "" {
				out[svc+"_url"] = u
			}
		}
	}
	return out
}

// SetDuration sets the simulated duration of a task type.
func (s *Service) SetDuration(taskType string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.durations[strings.ToUpper(taskType)] = d
}

// FailNext makes the next matching task end in FAIL.
func (s *Service) FailNext(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.Operation = strings.ToUpper(f.Operation)
	s.failNext = append(s.failNext, f)
}

// SetVersion adds a version to /v1/supports or changes whether it is valid.
func (s *Service) SetVersion(name string, supported bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setVersion(name, supported)
}

// SetSubnet declares the address range of a VPC subnet UUID (unknown
// subnets are 192.168.0.0/24).
func (s *Service) SetSubnet(uuid string, p netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subnets[uuid] = p.Masked()
}

// apiError is an answer in the Magnum error body.
type apiError struct {
	status int
	detail string
}

func (e *apiError) Error() string { return e.detail }

func errorf(status int, format string, args ...any) error {
	return &apiError{status: status, detail: fmt.Sprintf(format, args...)}
}

// writeError writes err in the Magnum error body.
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: 500, detail: err.Error()}
	}
	code := "client"
	if ae.status >= 500 {
		code = "server"
	}
	sim.WriteJSON(w, ae.status, map[string]any{"errors": []map[string]any{{
		"request_id": "", "code": code, "status": ae.status,
		"title": http.StatusText(ae.status), "detail": ae.detail, "links": []any{},
	}}})
}

// handlerFunc answers a request (under s.mu, after tick): a status and a
// body (nil: none) or an error.
type handlerFunc func(r *http.Request) (int, any, error)

// Handler serves the API of the spec and the admin routes.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h handlerFunc, nodegroupCall bool) {
		mux.Handle(pattern, s.guard(h, nodegroupCall))
	}
	api("GET /v1/clusters", s.listClusters, false)
	api("POST /v1/clusters", s.createCluster, false)
	api("GET /v1/clusters/{cluster}", s.getCluster, false)
	api("DELETE /v1/clusters/{cluster}", s.deleteCluster, false)
	api("GET /v1/clusters/{cluster}/events", s.listEvents, false)
	api("GET /v1/clusters/{cluster}/events/{event}", s.getEvent, false)
	api("POST /v1/clusters/{cluster}/actions/resize", s.resize, false)
	api("GET /v1/clusters/{cluster}/config", s.config, false)
	api("POST /v1/clusters/{cluster}/actions/cni_update", s.cniUpdate, false)
	api("GET /v1/clusters/{cluster}/api_ep_ipacl", s.getIPACL, false)
	api("POST /v1/clusters/{cluster}/api_ep_ipacl", s.setIPACL, false)
	api("GET /v1/clusters/{cluster}/nodegroups", s.listGroups, true)
	api("POST /v1/clusters/{cluster}/nodegroups", s.createGroup, true)
	api("GET /v1/clusters/{cluster}/nodegroups/{ng}", s.getGroup, true)
	api("DELETE /v1/clusters/{cluster}/nodegroups/{ng}", s.deleteGroup, true)
	api("PATCH /v1/clusters/{cluster}/nodegroups/{ng}", s.changeFlavor, true)
	api("POST /v1/clusters/{cluster}/nodegroups/{ng}/stop_node", s.stopNodes, true)
	api("POST /v1/clusters/{cluster}/nodegroups/{ng}/start_node", s.startNodes, true)
	api("GET /v1/clusters/{cluster}/nodegroups/{ng}/autoscale", s.getAutoscale, true)
	api("POST /v1/clusters/{cluster}/nodegroups/{ng}/autoscale", s.setAutoscale, true)
	api("POST /v1/clusters/{cluster}/nodegroups/{ng}/upgrade", s.upgrade, true)
	api("POST /v1/clusters/{cluster}/nodegroups/{ng}/userscript", s.userScript, true)
	api("GET /v1/supports", s.supports, false)
	s.adminRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(404, "The resource could not be found: %s %s.", r.Method, r.URL.Path))
	})
	return mux
}

// Version headers: the spec's name and the one public clients send.
const (
	versionHeader       = "OpenStack-API-Version"
	platformHeader      = "Platform-API-Version"
	minNodegroupVersion = 9 // container-infra 1.9 introduced node groups
	maxMinorVersion     = 10
)

// guard checks the token and the version header, then runs h under the
// lock after completing due tasks.
func (s *Service) guard(h handlerFunc, nodegroupCall bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("X-Auth-Token")
		if tok == "" || (tok != s.token && !s.tokens.Valid(tok)) {
			writeError(w, errorf(401, "The request you have made requires authentication."))
			return
		}
		if err := checkVersion(r, nodegroupCall); err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set(versionHeader, "container-infra 1."+strconv.Itoa(maxMinorVersion))
		w.Header().Set("OpenStack-API-Minimum-Version", "container-infra 1.1")
		w.Header().Set("OpenStack-API-Maximum-Version", "container-infra 1."+strconv.Itoa(maxMinorVersion))
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tick()
		status, body, err := h(r)
		if err != nil {
			writeError(w, err)
			return
		}
		if body == nil {
			w.WriteHeader(status)
			return
		}
		sim.WriteJSON(w, status, body)
	})
}

// checkVersion accepts "container-infra latest" or "container-infra 1.N"
// under either header name. Like the real service, a missing header is
// refused (406) on node-group calls only, which need 1.9 or later; an
// unparsable or unknown version is refused everywhere.
func checkVersion(r *http.Request, nodegroupCall bool) error {
	v := r.Header.Get(versionHeader)
	if v == "" {
		v = r.Header.Get(platformHeader)
	}
	if v == "" {
		if nodegroupCall {
			return errorf(406, "Version 1.1 was requested but the minor version is not supported by this service. The supported version range is: [1.%d, 1.%d]. Send %s: container-infra latest.",
				minNodegroupVersion, maxMinorVersion, versionHeader)
		}
		return nil
	}
	service, ver, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || service != "container-infra" {
		return errorf(406, "Invalid %s header %q: expected \"container-infra latest\".", versionHeader, v)
	}
	ver = strings.TrimSpace(ver)
	if ver == "latest" {
		return nil
	}
	major, minor, ok := strings.Cut(ver, ".")
	n, err := strconv.Atoi(minor)
	if !ok || major != "1" || err != nil || n < 1 || n > maxMinorVersion {
		return errorf(406, "Version %s was requested but is not supported by this service. The supported version range is: [1.1, 1.%d].", ver, maxMinorVersion)
	}
	if nodegroupCall && n < minNodegroupVersion {
		return errorf(406, "Version 1.%d was requested but the minor version is not supported by this service. The supported version range is: [1.%d, 1.%d].", n, minNodegroupVersion, maxMinorVersion)
	}
	return nil
}

// decode reads a JSON request body into v.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return errorf(400, "Cannot read the request body: %v.", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return errorf(400, "The request body is empty; a JSON object is expected.")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(400, "Invalid JSON in the request body: %v.", err)
	}
	return nil
}

func (s *Service) newUUID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(s.rnd.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// timestamp formats a time as the API does: UTC, ISO 8601 with offset.
func timestamp(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05-07:00")
}
