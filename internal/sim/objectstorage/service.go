package objectstorage

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/identity"
)

func init() { sim.Register("objectstorage", New) }

// Swift's limits.
const (
	MaxObjectSize      = 5 << 30 // a single (non-segmented) object
	MaxObjectNameBytes = 1024
	MaxContainerBytes  = 256
	ListingLimit       = 10000 // default and largest page of a listing
)

// Service is the simulated Swift API.
type Service struct {
	env    *sim.Env
	tokens *identity.Store
	store  *Store
	token  string // static token, handed out only when identity does not run
}

var (
	_ sim.Service    = (*Service)(nil)
	_ sim.ExactPaths = (*Service)(nil)
)

// New creates the object storage simulator of env's server.
func New(env *sim.Env) (sim.Service, error) {
	return &Service{env: env, tokens: identity.For(env), store: For(env), token: fmt.Sprintf("sim-obs-token-%d", env.Seed)}, nil
}

// Store returns the objects (for in-process tests and simulators).
func (s *Service) Store() *Store { return s.store }

// ExactPaths keeps trailing slashes: an object name may end in "/" (Swift
// lists pseudo-folders that way), so "/v1/AUTH_t/c/dir/" names the object
// "dir/", not the container. The account and container paths accept a
// trailing slash on their own (see Handler).
func (s *Service) ExactPaths() {}

// Token returns the static token the service accepts besides identity
// tokens.
func (s *Service) Token() string { return s.token }

// Tenant returns the tenant ID of the simulator's credentials: obs://
// URIs for the simulator use AUTH_<Tenant()>.
func (s *Service) Tenant() string { return s.tokens.Credentials().TenantID }

// Connection returns base_url (used instead of an obs:// URI's host) and
// the identity settings when identity runs on the same server, else the
// static token.
func (s *Service) Connection(baseURL string) map[string]any {
	out := map[string]any{"base_url": baseURL}
	c := s.tokens.Credentials()
	out["tenant_id"] = c.TenantID
	if s.env.URL != nil {
		if u := s.env.URL("identity"); u != "" {
			out["identity_url"], out["username"], out["password"] = u, c.Username, c.Password
			return out
		}
	}
	out["token"] = s.token
	return out
}

// Handler serves the Swift paths below /v1/.
func (s *Service) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Trans-Id", fmt.Sprintf("tx%x", s.env.Clock.Now().UnixNano()))
	_, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		plain(w, http.StatusNotFound, "<html><h1>Not Found</h1><p>The resource could not be found.</p></html>")
		return
	}
	// Object names keep their slashes; use the escaped path to split off
	// account and container, then unescape each part.
	raw, _ := strings.CutPrefix(r.URL.EscapedPath(), "/v1/")
	parts := strings.SplitN(raw, "/", 3)
	for i := range parts {
		p, err := url.PathUnescape(parts[i])
		if err != nil {
			plain(w, http.StatusPreconditionFailed, "Invalid UTF8 or contains NULL")
			return
		}
		parts[i] = p
	}
	tok := r.Header.Get("X-Auth-Token")
	if tok == "" {
		tok = r.Header.Get("X-Storage-Token")
	}
	if tok == "" || (tok != s.token && !s.tokens.Valid(tok)) {
		w.Header().Set("Www-Authenticate", `Swift realm="`+parts[0]+`"`)
		plain(w, http.StatusUnauthorized, "<html><h1>Unauthorized</h1><p>This server could not verify that you are authorized to access the document you requested.</p></html>")
		return
	}
	account := parts[0]
	if !strings.HasPrefix(account, "AUTH_") || len(account) == len("AUTH_") {
		plain(w, http.StatusNotFound, "<html><h1>Not Found</h1><p>The resource could not be found.</p></html>")
		return
	}
	switch {
	case len(parts) == 1 || parts[1] == "":
		s.account(w, r, account)
	case len(parts) == 2 || parts[2] == "":
		s.container(w, r, account, parts[1])
	default:
		s.object(w, r, account, parts[1], parts[2])
	}
}

func (s *Service) account(w http.ResponseWriter, r *http.Request, account string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w)
		return
	}
	s.store.mu.Lock()
	var names []string
	for name := range s.store.accounts[account] {
		names = append(names, name)
	}
	s.store.mu.Unlock()
	sort.Strings(names)
	w.Header().Set("X-Account-Container-Count", strconv.Itoa(len(names)))
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if wantJSON(r) {
		out := make([]map[string]any, 0, len(names))
		for _, n := range names {
			count, used := s.usage(account, n)
			out = append(out, map[string]any{"name": n, "count": count, "bytes": used})
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if len(names) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	plain(w, http.StatusOK, strings.Join(names, "\n")+"\n")
}

func (s *Service) usage(account, container string) (count int, bytes int64) {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c := s.store.accounts[account][container]
	if c == nil {
		return 0, 0
	}
	for _, o := range c.objects {
		count++
		bytes += int64(len(o.Data))
	}
	return count, bytes
}

func (s *Service) container(w http.ResponseWriter, r *http.Request, account, name string) {
	if len(name) > MaxContainerBytes {
		plain(w, http.StatusBadRequest, fmt.Sprintf("Container name length of %d longer than %d", len(name), MaxContainerBytes))
		return
	}
	switch r.Method {
	case http.MethodPut:
		if s.store.CreateContainer(account, name) {
			w.WriteHeader(http.StatusCreated)
		} else {
			w.WriteHeader(http.StatusAccepted)
		}
	case http.MethodDelete:
		s.store.mu.Lock()
		c := s.store.accounts[account][name]
		switch {
		case c == nil:
			s.store.mu.Unlock()
			notFound(w)
		case len(c.objects) > 0:
			s.store.mu.Unlock()
			plain(w, http.StatusConflict, "<html><h1>Conflict</h1><p>There was a conflict when trying to complete your request.</p></html>")
		default:
			delete(s.store.accounts[account], name)
			s.store.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	case http.MethodGet, http.MethodHead:
		if !s.store.HasContainer(account, name) {
			notFound(w)
			return
		}
		count, used := s.usage(account, name)
		w.Header().Set("X-Container-Object-Count", strconv.Itoa(count))
		w.Header().Set("X-Container-Bytes-Used", strconv.FormatInt(used, 10))
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		s.list(w, r, account, name)
	default:
		methodNotAllowed(w)
	}
}

// listing is one entry of a JSON container listing.
type listing struct {
	Name         string `json:"name,omitempty"`
	Hash         string `json:"hash,omitempty"`
	Bytes        *int64 `json:"bytes,omitempty"`
	ContentType  string `json:"content_type,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	Subdir       string `json:"subdir,omitempty"`
}

// list answers a container listing with Swift's parameters: prefix,
// delimiter, marker, end_marker, limit (at most ListingLimit).
func (s *Service) list(w http.ResponseWriter, r *http.Request, account, name string) {
	q := r.URL.Query()
	limit := ListingLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			plain(w, http.StatusPreconditionFailed, "Value of limit must be a positive integer")
			return
		}
		if n > ListingLimit {
			plain(w, http.StatusPreconditionFailed, fmt.Sprintf("Maximum limit is %d", ListingLimit))
			return
		}
		limit = n
	}
	prefix, delim, marker, end := q.Get("prefix"), q.Get("delimiter"), q.Get("marker"), q.Get("end_marker")
	if len(delim) > 1 {
		plain(w, http.StatusPreconditionFailed, "Bad delimiter")
		return
	}
	s.store.mu.Lock()
	c := s.store.accounts[account][name]
	var entries []listing
	if c != nil {
		names := make([]string, 0, len(c.objects))
		for n := range c.objects {
			names = append(names, n)
		}
		sort.Strings(names)
		seen := map[string]bool{}
		for _, n := range names {
			if len(entries) >= limit {
				break
			}
			if !strings.HasPrefix(n, prefix) || (marker != "" && n <= marker) || (end != "" && n >= end) {
				continue
			}
			if delim != "" {
				if i := strings.Index(n[len(prefix):], delim); i >= 0 {
					sub := n[:len(prefix)+i+1]
					if marker != "" && sub <= marker {
						continue
					}
					if !seen[sub] {
						seen[sub] = true
						entries = append(entries, listing{Subdir: sub})
					}
					continue
				}
			}
			o := c.objects[n]
			size := int64(len(o.Data))
			entries = append(entries, listing{Name: n, Hash: o.ETag, Bytes: &size, ContentType: o.ContentType,
				LastModified: o.LastModified.Format("2006-01-02T15:04:05.000000")})
		}
	}
	s.store.mu.Unlock()
	if wantJSON(r) {
		if entries == nil {
			entries = []listing{}
		}
		writeJSON(w, http.StatusOK, entries)
		return
	}
	if len(entries) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var b strings.Builder
	for _, e := range entries {
		if e.Subdir != "" {
			b.WriteString(e.Subdir)
		} else {
			b.WriteString(e.Name)
		}
		b.WriteByte('\n')
	}
	plain(w, http.StatusOK, b.String())
}

func (s *Service) object(w http.ResponseWriter, r *http.Request, account, cont, name string) {
	if len(name) > MaxObjectNameBytes {
		plain(w, http.StatusBadRequest, fmt.Sprintf("Object name length of %d longer than %d", len(name), MaxObjectNameBytes))
		return
	}
	switch r.Method {
	case http.MethodPut:
		s.put(w, r, account, cont, name)
	case http.MethodGet, http.MethodHead:
		o, ok := s.store.Stat(account, cont, name)
		if !ok {
			notFound(w)
			return
		}
		h := w.Header()
		h.Set("Content-Type", o.ContentType)
		h.Set("Content-Length", strconv.Itoa(len(o.Data)))
		h.Set("ETag", o.ETag)
		h.Set("Last-Modified", o.LastModified.Format(http.TimeFormat))
		h.Set("X-Timestamp", fmt.Sprintf("%d.%05d", o.LastModified.Unix(), o.LastModified.Nanosecond()/10000))
		h.Set("Accept-Ranges", "bytes")
		if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Trim(inm, `"`) == o.ETag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(o.Data)
		}
	case http.MethodDelete:
		if !s.store.Delete(account, cont, name) {
			notFound(w)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		methodNotAllowed(w)
	}
}

func (s *Service) put(w http.ResponseWriter, r *http.Request, account, cont, name string) {
	if r.ContentLength < 0 && r.Header.Get("Transfer-Encoding") == "" {
		plain(w, http.StatusLengthRequired, "<html><h1>Length Required</h1><p>Length Required</p></html>")
		return
	}
	if r.ContentLength > MaxObjectSize {
		plain(w, http.StatusRequestEntityTooLarge, "Your request is too large.")
		return
	}
	if !s.store.HasContainer(account, cont) {
		notFound(w)
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxObjectSize+1))
	if err != nil {
		plain(w, http.StatusRequestTimeout, "<html><h1>Request Timeout</h1><p>The server has waited too long for the request to be sent by the client.</p></html>")
		return
	}
	if len(data) > MaxObjectSize {
		plain(w, http.StatusRequestEntityTooLarge, "Your request is too large.")
		return
	}
	if r.ContentLength >= 0 && int64(len(data)) != r.ContentLength {
		plain(w, http.StatusRequestTimeout, "<html><h1>Request Timeout</h1><p>The server has waited too long for the request to be sent by the client.</p></html>")
		return
	}
	sum := md5.Sum(data)
	etag := hex.EncodeToString(sum[:])
	if want := strings.Trim(r.Header.Get("ETag"), `"`); want != "" && !strings.EqualFold(want, etag) {
		plain(w, http.StatusUnprocessableEntity, "<html><h1>Unprocessable Entity</h1><p>Unable to process the contained instructions</p></html>")
		return
	}
	o, ok := s.store.put(account, cont, name, data, r.Header.Get("Content-Type"), false)
	if !ok { // deleted meanwhile
		notFound(w)
		return
	}
	w.Header().Set("ETag", o.ETag)
	w.Header().Set("Last-Modified", o.LastModified.Format(http.TimeFormat))
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.WriteHeader(http.StatusCreated)
}

func wantJSON(r *http.Request) bool {
	return r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json")
}

func notFound(w http.ResponseWriter) {
	plain(w, http.StatusNotFound, "<html><h1>Not Found</h1><p>The resource could not be found.</p></html>")
}

func methodNotAllowed(w http.ResponseWriter) {
	plain(w, http.StatusMethodNotAllowed, "<html><h1>Method Not Allowed</h1><p>The method is not allowed for this resource.</p></html>")
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
