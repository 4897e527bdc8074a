package easymaker

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
)

func init() { sim.Register("easymaker", New) }

// Result codes of the envelope header (see doc.go).
const (
	codeOK         = 0
	codeInvalid    = 40000
	codeAuth       = 40100
	codeNotFound   = 40400
	codeConflict   = 40900
	codeInProgress = 40901
	codeInternal   = 50000
)

// TokenLifetime is expires_in of the simulated token endpoint.
const TokenLifetime = 24 * time.Hour

// Service is the simulated AI EasyMaker API.
type Service struct {
	env       *sim.Env
	appKey    string
	secretKey string
	accessID  string
	accessKey string

	mu          sync.Mutex
	rnd         *rand.Rand
	tokens      map[string]time.Time // bearer token -> expiry (simulated)
	flavors     []em.Flavor
	images      []em.Image
	algorithms  []em.Algorithm
	experiments []*experiment
	trainings   []*training // trials of tunings included (tuning != nil)
	tunings     []*tuning
	models      []*model
	endpoints   []*endpoint
	stages      []*stage
	batches     []*batch
	all         collections // the resources above, for the API's get, list and delete
	objects     ObjectStore
	seq         int
}

var _ sim.Service = (*Service)(nil)

// New creates the EasyMaker simulator of env's server.
func New(env *sim.Env) (sim.Service, error) {
	s := &Service{
		env:       env,
		appKey:    fmt.Sprintf("sim-appkey-%d", env.Seed),
		secretKey: fmt.Sprintf("sim-secret-%d", env.Seed),
		accessID:  fmt.Sprintf("sim-access-key-%d", env.Seed),
		accessKey: fmt.Sprintf("sim-access-secret-%d", env.Seed),
		rnd:       rand.New(rand.NewPCG(env.Seed, 0x656d)),
		tokens:    map[string]time.Time{},
	}
	s.flavors, s.images, s.algorithms = catalog()
	s.objects = defaultObjectStore(env)
	s.all = s.collections()
	return s, nil
}

// AppKey, SecretKey and AccessKey return the credentials the service
// accepts.
func (s *Service) AppKey() string                 { return s.appKey }
func (s *Service) SecretKey() string              { return s.secretKey }
func (s *Service) AccessKey() (id, secret string) { return s.accessID, s.accessKey }

// SetObjectStore replaces the store batch inference reads and writes.
func (s *Service) SetObjectStore(o ObjectStore) { s.mu.Lock(); s.objects = o; s.mu.Unlock() }

// Objects returns the store batch inference reads and writes.
func (s *Service) Objects() ObjectStore { s.mu.Lock(); defer s.mu.Unlock(); return s.objects }

func (s *Service) now() time.Time { return s.env.Clock.Now() }

// Connection returns base_url, region, appkey, secret_key, the access key
// pair and token_url (the token endpoint this simulator serves), so both
// authentication schemes can be tested.
func (s *Service) Connection(baseURL string) map[string]any {
	return map[string]any{
		"base_url": baseURL, "region": "kr1", "appkey": s.appKey, "secret_key": s.secretKey,
		"access_key_id": s.accessID, "access_key_secret": s.accessKey,
		"token_url": baseURL + "/oauth2/token/create",
	}
}

// Handler serves /oauth2/token/create, /_stage/{stageId}/... (the
// model servers behind the stages' apigwStageUrl) and
// /v1.0/appkeys/{appkey}/... .
func (s *Service) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/oauth2/token/create":
			s.token(w, r)
		case strings.HasPrefix(p, "/_stage/"):
			s.predict(w, r)
		case strings.HasPrefix(p, "/v1.0/appkeys/"):
			s.api(w, r)
		default:
			writeErr(w, &apiError{http.StatusNotFound, codeNotFound, "no such path: " + p})
		}
	})
}

// apiError is a failed answer in the envelope.
type apiError struct {
	status int
	code   int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errf(status, code int, format string, args ...any) *apiError {
	return &apiError{status, code, fmt.Sprintf(format, args...)}
}

func notFound(what, id string) *apiError {
	return errf(http.StatusNotFound, codeNotFound, "%s %s does not exist", what, id)
}

// invalid answers the limit problems of req, each naming its field the way
// the request body does, then the SDK's parameter name where that differs
// ("trainingName / training_name: is required"): a caller of the API and a
// user of the SDK or of the steps both recognise it.
func invalid(req any, ps []fault.Problem) *apiError {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		if body := em.BodyPath(req, p.Path); body != p.Path {
			p.Path = body + " / " + p.Path
		}
		msgs[i] = p.Error()
	}
	return errf(http.StatusBadRequest, codeInvalid, "invalid request: %s", strings.Join(msgs, "; "))
}

func header(code int, msg string) em.Header {
	return em.Header{IsSuccessful: code == codeOK, ResultCode: code, ResultMessage: msg}
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, codeInternal, err.Error()}
	}
	sim.WriteJSON(w, ae.status, map[string]any{"header": header(ae.code, ae.msg)})
}

// writeOK answers the envelope with v under key.
func writeOK(w http.ResponseWriter, status int, key string, v any) {
	body := map[string]any{"header": header(codeOK, "SUCCESS")}
	if key != "" {
		body[key] = v
	}
	sim.WriteJSON(w, status, body)
}

// writeList answers one page of items under key+"List" with paging:
// ?page (1-based, default 1) and ?limit (default 50, at most 1000).
func writeList[T any](w http.ResponseWriter, r *http.Request, key string, items []T) {
	q := r.URL.Query()
	page, limit := 1, 50
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeErr(w, errf(http.StatusBadRequest, codeInvalid, "invalid request: page must be a positive integer (got %q)", v))
			return
		}
		page = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeErr(w, errf(http.StatusBadRequest, codeInvalid, "invalid request: limit must be between 1 and 1000 (got %q)", v))
			return
		}
		limit = n
	}
	from := min((page-1)*limit, len(items))
	to := min(from+limit, len(items))
	out := items[from:to]
	if out == nil {
		out = []T{}
	}
	sim.WriteJSON(w, http.StatusOK, map[string]any{
		"header":     header(codeOK, "SUCCESS"),
		key + "List": out,
		"paging":     em.Paging{Page: page, Limit: limit, TotalCount: len(items)},
	})
}

// decode reads a JSON body into v (unknown fields are ignored, as the
// real service does with fields of newer SDKs).
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return errf(http.StatusBadRequest, codeInvalid, "reading the body: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: the body is not valid JSON for this call: %v", err)
	}
	return nil
}

// decodeRequest reads a create request's body (decode) and checks its
// limits, answering them as invalid does.
func decodeRequest[R any, P interface {
	*R
	Problems() []fault.Problem
}](r *http.Request) (P, error) {
	req := P(new(R))
	if err := decode(r, req); err != nil {
		return nil, err
	}
	if ps := req.Problems(); len(ps) > 0 {
		return nil, invalid(req, ps)
	}
	return req, nil
}

// token serves the OAuth token endpoint: Basic auth with the access key
// pair, form grant_type=client_credentials.
func (s *Service) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		sim.WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method_not_allowed"})
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok || id != s.accessID || secret != s.accessKey {
		sim.WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "unknown access key ID or wrong secret"})
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		sim.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type", "error_description": "grant_type must be client_credentials"})
		return
	}
	s.mu.Lock()
	s.seq++
	tok := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("sim-token-%d-%d-%d", s.env.Seed, s.seq, s.rnd.Uint64())))
	s.tokens[tok] = s.now().Add(TokenLifetime)
	s.mu.Unlock()
	sim.WriteJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(TokenLifetime / time.Second)})
}

// ExpireTokens makes every issued bearer token invalid (tests of the
// client's refresh after a 401).
func (s *Service) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]time.Time{}
}

func (s *Service) authorized(r *http.Request) bool {
	if k := r.Header.Get(em.HeaderSecretKey); k != "" {
		return k == s.secretKey
	}
	v := r.Header.Get(em.HeaderAuthorization)
	tok, ok := strings.CutPrefix(v, "Bearer ")
	if !ok {
		return false
	}
	exp, ok := s.tokens[strings.TrimSpace(tok)]
	return ok && s.now().Before(exp)
}

// newID returns a UUID-shaped ID drawn from the seeded generator.
func (s *Service) newID() string {
	a, b := s.rnd.Uint64(), s.rnd.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xfff, 0x8000|(b>>48)&0x3fff, b&0xffffffffffff)
}

// phase is one status a resource takes at a simulated time.
type phase struct {
	at     time.Time
	status string
}

// timeline is a resource's status schedule: the status at time t is the
// last phase at or before t. Stops and failures rewrite the tail.
type timeline []phase

func (tl timeline) at(t time.Time) string {
	st, _ := tl.state(t)
	return st
}

// state is the status at time t and when the resource took it (its
// updatedDatetime).
func (tl timeline) state(t time.Time) (status string, since time.Time) {
	for _, p := range tl {
		if p.at.After(t) {
			break
		}
		status, since = p.status, p.at
	}
	return status, since
}

// schedule builds a timeline from start and (offset, status) pairs.
func schedule(start time.Time, steps ...any) timeline {
	var tl timeline
	for i := 0; i+1 < len(steps); i += 2 {
		tl = append(tl, phase{start.Add(steps[i].(time.Duration)), steps[i+1].(string)})
	}
	return tl
}

// cut keeps the phases up to now and appends the given ones.
func (tl timeline) cut(now time.Time, then ...phase) timeline {
	var out timeline
	for _, p := range tl {
		if !p.at.After(now) {
			out = append(out, p)
		}
	}
	return append(out, then...)
}

// stopping keeps the phases up to now, then STOP_IN_PROGRESS from now
// and STOPPED after stopDuration.
func (tl timeline) stopping(now time.Time) timeline {
	return tl.cut(now, phase{now, em.StatusStopInProgress}, phase{now.Add(stopDuration), em.StatusStopped})
}

// end is the time of the last phase.
func (tl timeline) end() time.Time {
	if len(tl) == 0 {
		return time.Time{}
	}
	return tl[len(tl)-1].at
}

func finished(status string) bool {
	done, _ := em.StatusDone(status)
	return done && !strings.HasSuffix(status, "_IN_PROGRESS")
}

func sortByCreated[T any](items []T, created func(T) time.Time) {
	sort.SliceStable(items, func(i, j int) bool { return created(items[i]).Before(created(items[j])) })
}
