package helpcenter

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/sim"
)

func init() {
	sim.Register("helpcenter", func(env *sim.Env) (sim.Service, error) { return New(env, Options{}) })
}

// Defaults of Options.
const (
	DefaultServiceID   = "runbook-demo"
	DefaultOrgID       = "runbook-org"
	DefaultSecurityKey = "sim-helpcenter-security-key"
	DefaultNotices     = 300
	// TimestampWindow is how far X-TC-Timestamp may be from the wall clock
	// (FIDELITY: valid for 5 minutes). Signatures are checked against real
	// time, not the simulated clock: clients sign with their own clock, and
	// a simulator running faster than real time (or advanced by a test)
	// must not make every signature look expired.
	TimestampWindow = 5 * time.Minute
)

// Options configure a simulated help center; zero fields take the defaults.
type Options struct {
	ServiceID   string
	OrgID       string
	SecurityKey string
	Notices     int // generated notices (default 300)
}

// Service is the simulated help center.
type Service struct {
	env  *sim.Env
	opts Options

	mu      sync.Mutex
	notices []*notice
	byID    map[int]*notice
	files   map[string]*attachment
	nextID  int
	reads   int
}

var (
	_ sim.Service    = (*Service)(nil)
	_ sim.ExactPaths = (*Service)(nil)
)

// New returns a help center whose notices are generated from env.Seed,
// dated before env.Clock's current time.
func New(env *sim.Env, o Options) (*Service, error) {
	if o.ServiceID == "" {
		o.ServiceID = DefaultServiceID
	}
	if o.OrgID == "" {
		o.OrgID = DefaultOrgID
	}
	if o.SecurityKey == "" {
		o.SecurityKey = DefaultSecurityKey
	}
	if o.Notices < 0 {
		return nil, fmt.Errorf("helpcenter: notices must not be negative (got %d)", o.Notices)
	}
	if o.Notices == 0 {
		o.Notices = DefaultNotices
	}
	s := &Service{env: env, opts: o}
	s.Reset(o.Notices)
	return s, nil
}

// ExactPaths keeps the path exactly as sent: the notice list signs it, and
// no path of this API is a collection that a client could address with a
// trailing slash.
func (s *Service) ExactPaths() {}

// Connection returns base_url, service_id, org_id, security_key and
// language.
func (s *Service) Connection(baseURL string) map[string]any {
	return map[string]any{
		"base_url": baseURL, "service_id": s.opts.ServiceID, "org_id": s.opts.OrgID,
		"security_key": s.opts.SecurityKey, "language": "ko",
	}
}

// Reset replaces every notice with n generated ones (dated before the
// simulated clock's current time) and forgets read counts.
func (s *Service) Reset(n int) {
	list := generate(s.env.Seed, n, s.env.Clock.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notices, s.byID, s.files, s.reads = list, map[int]*notice{}, map[string]*attachment{}, 0
	s.nextID = 1001 + n
	for _, nt := range list {
		s.index(nt)
	}
}

func (s *Service) index(nt *notice) {
	s.byID[nt.id] = nt
	for _, a := range nt.attachments {
		s.files[a.id] = a
	}
}

// Count returns the number of notices.
func (s *Service) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.notices)
}

// NewNotice is a notice to add. Title and Content serve every language.
type NewNotice struct {
	Title      string `json:"title"`
	Content    string `json:"content"`
	CategoryID int    `json:"categoryId"` // default 1 (announcements)
	Tags       []int  `json:"tags"`       // tag IDs
	IsTop      bool   `json:"isTop"`
	// DisplayDt is yyyyMMddHHmmss, yyyy.MM.dd (Asia/Seoul) or RFC 3339;
	// default: the simulated clock's now.
	DisplayDt   string          `json:"displayDt"`
	Attachments []NewAttachment `json:"attachments"`
}

// NewAttachment is a file of a NewNotice: Data, or Text when Data is empty.
type NewAttachment struct {
	FileName    string `json:"fileName"`
	ContentType string `json:"contentType"` // default from the name, else application/octet-stream
	Text        string `json:"text"`
	Data        []byte `json:"data"` // base64 in JSON
}

// AddNotice adds a notice and returns its ID.
func (s *Service) AddNotice(in NewNotice) (int, error) {
	if strings.TrimSpace(in.Title) == "" {
		return 0, fmt.Errorf("title is required")
	}
	if in.CategoryID == 0 {
		in.CategoryID = catAnnouncement
	}
	if findNamed(headings, in.CategoryID) == nil {
		return 0, fmt.Errorf("no heading %d (have 1..%d)", in.CategoryID, len(headings))
	}
	for _, t := range in.Tags {
		if findNamed(tags, t) == nil {
			return 0, fmt.Errorf("no tag %d (have 1..%d)", t, len(tags))
		}
	}
	now := s.env.Clock.Now()
	display := now.Truncate(time.Second)
	if in.DisplayDt != "" {
		t, err := parseDisplay(in.DisplayDt)
		if err != nil {
			return 0, err
		}
		display = t
	}
	nt := &notice{
		category: in.CategoryID, isTop: in.IsTop, tags: append([]int(nil), in.Tags...),
		title: map[string]string{"": in.Title}, content: map[string]string{"": in.Content},
		display: display, created: now, updated: now,
	}
	for i, a := range in.Attachments {
		if strings.TrimSpace(a.FileName) == "" {
			return 0, fmt.Errorf("attachments[%d]: fileName is required", i)
		}
		data := a.Data
		if len(data) == 0 {
			data = []byte(a.Text)
		}
		ct := a.ContentType
		if ct == "" {
			if dot := strings.LastIndexByte(a.FileName, '.'); dot >= 0 {
				ct = mime.TypeByExtension(a.FileName[dot:])
			}
			if ct == "" {
				ct = "application/octet-stream"
			}
		}
		nt.attachments = append(nt.attachments, &attachment{fileName: a.FileName, contentType: ct, data: data})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	nt.id = s.nextID
	s.nextID++
	for i, a := range nt.attachments {
		a.id = fmt.Sprintf("added-%d-%d", nt.id, i+1)
	}
	s.notices = append(s.notices, nt)
	s.index(nt)
	return nt.id, nil
}

func parseDisplay(v string) (time.Time, error) {
	for _, layout := range []string{"20060102150405", "2006.01.02"} {
		if t, err := time.ParseInLocation(layout, v, seoul()); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("displayDt %q: want yyyyMMddHHmmss, yyyy.MM.dd or RFC 3339", v)
}

func findNamed(list []named, id int) *named {
	for i := range list {
		if list[i].id == id {
			return &list[i]
		}
	}
	return nil
}

// Handler serves /{serviceId}/api/v2/notice/... and /_admin/.
func (s *Service) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/_admin/") {
			s.admin(w, r)
			return
		}
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(parts) < 5 || parts[1] != "api" || parts[2] != "v2" || parts[3] != "notice" {
			fail(w, 404, "no data: no API at "+r.URL.Path)
			return
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			fail(w, 405, "method "+r.Method+" not allowed: every operation is GET")
			return
		}
		if parts[0] != s.opts.ServiceID {
			fail(w, 404, fmt.Sprintf("no data: no help center with service ID %q", parts[0]))
			return
		}
		q := r.URL.Query()
		lang := language(q.Get("language"))
		switch rest := parts[4:]; {
		case len(rest) == 1 && rest[0] == "categories.json":
			s.headings(w, lang)
		case len(rest) == 1 && rest[0] == "tags.json":
			s.tags(w, q.Get("language"))
		case len(rest) == 1 && rest[0] == "list.json":
			if !s.authorized(w, r) {
				return
			}
			s.list(w, q, lang)
		case len(rest) == 2 && rest[0] == "detail" && strings.HasSuffix(rest[1], ".json"):
			id, err := strconv.Atoi(strings.TrimSuffix(rest[1], ".json"))
			if err != nil {
				fail(w, 400, fmt.Sprintf("id must be an integer (got %q)", strings.TrimSuffix(rest[1], ".json")))
				return
			}
			s.detail(w, id, lang)
		case len(rest) == 2 && rest[0] == "attachments":
			s.attachment(w, rest[1], q.Get("type"))
		default:
			fail(w, 404, "no data: no API at "+r.URL.Path)
		}
	})
}

// language maps a requested language to one the help center has (default
// ko).
func language(l string) string {
	for _, have := range languages {
		if strings.EqualFold(l, have) {
			return have
		}
	}
	return languages[0]
}

func ok(w http.ResponseWriter, result any) {
	writeJSON(w, http.StatusOK, map[string]any{
		"header": map[string]any{"resultCode": 200, "resultMessage": "", "isSuccessful": true},
		"result": result,
	})
}

// fail answers an error envelope; the HTTP status is the result code
// (9005, which is no HTTP status, answers 404).
func fail(w http.ResponseWriter, code int, msg string) {
	status := code
	if code == 9005 {
		status = http.StatusNotFound
	}
	writeJSON(w, status, map[string]any{
		"header": map[string]any{"resultCode": code, "resultMessage": msg, "isSuccessful": false},
		"result": nil,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func (s *Service) headings(w http.ResponseWriter, lang string) {
	out := make([]map[string]any, 0, len(headings))
	for i, h := range headings {
		out = append(out, map[string]any{
			"categoryId": h.id, "parent": 0, "name": h.names[lang], "level": 1, "path": `\`,
			"orderNo": i + 1, "languages": h.names,
		})
	}
	ok(w, map[string]any{"contents": out})
}

// tags answers the tag list. The spec describes the language parameter as
// "the tag search phrase": a language code names the tags in that
// language; anything else filters tags whose name in any language contains
// it.
func (s *Service) tags(w http.ResponseWriter, param string) {
	lang, phrase := language(param), ""
	if param != "" && !strings.EqualFold(param, lang) {
		phrase = strings.ToLower(param)
	}
	out := []map[string]any{}
	for _, t := range tags {
		if phrase != "" {
			hit := false
			for _, n := range t.names {
				hit = hit || strings.Contains(strings.ToLower(n), phrase)
			}
			if !hit {
				continue
			}
		}
		out = append(out, map[string]any{"tagId": t.id, "tag": t.names[lang], "languages": t.names})
	}
	ok(w, map[string]any{"contents": out})
}

// authorized checks common authentication and answers 400 when it fails.
func (s *Service) authorized(w http.ResponseWriter, r *http.Request) bool {
	sig := r.Header.Get("Authorization")
	if strings.TrimSpace(sig) == "" {
		fail(w, 400, "Authorization header is blank: the notice list requires common authentication")
		return false
	}
	tsText := r.Header.Get("X-TC-Timestamp")
	ts, err := strconv.ParseInt(strings.TrimSpace(tsText), 10, 64)
	if err != nil {
		fail(w, 400, fmt.Sprintf("X-TC-Timestamp is not numeric (got %q): send epoch milliseconds", tsText))
		return false
	}
	now := time.Now()
	if d := now.Sub(time.UnixMilli(ts)); d > TimestampWindow || d < -TimestampWindow {
		fail(w, 400, fmt.Sprintf("X-TC-Timestamp expired: %d is %s away from the server time %d (allowed: 5m)",
			ts, d.Abs().Round(time.Second), now.UnixMilli()))
		return false
	}
	// The signed path is the one the real host sees: /{serviceId}/api/v2/...
	// without the simulator's mount prefix (/helpcenter), which the server
	// stripped before this handler. ExactPaths keeps it as the client sent it.
	path := r.URL.EscapedPath()
	q, _ := url.ParseQuery(r.URL.RawQuery)
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	sort.Strings(names)
	var vals []string
	for _, n := range names {
		vals = append(vals, q[n]...)
	}
	mac := hmac.New(sha256.New, []byte(s.opts.SecurityKey))
	mac.Write([]byte(s.opts.OrgID + path + strings.Join(vals, "&") + strconv.FormatInt(ts, 10)))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(strings.TrimSpace(sig))) {
		fail(w, 400, "Authorization signature is wrong: check the organization ID and security key")
		return false
	}
	return true
}

func isNew(display, now time.Time) bool {
	a, b := display.In(seoul()), now.In(seoul())
	return a.Year() == b.Year() && a.YearDay() == b.YearDay()
}

func yn(b bool) string {
	if b {
		return "Y"
	}
	return "N"
}
