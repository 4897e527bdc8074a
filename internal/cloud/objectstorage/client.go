package objectstorage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/cloud/httpcall"
	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/fault"
)

// Limits of a transfer (Swift's own and runbook's defaults).
const (
	MaxObjectSize      = 5 << 30 // Swift's largest single object
	MaxObjectNameBytes = 1024    // Swift's longest object name
	DefaultMaxFiles    = 10000
	listPage           = 1000
	maxErrorBody       = 64 << 10
)

// Backoff bounds of the retries.
const (
	baseBackoff   = 500 * time.Millisecond
	maxBackoff    = 10 * time.Second
	maxRetryAfter = 60 * time.Second
)

// Config configures a Client.
type Config struct {
	// BaseURL, when set, is used instead of the https://{host} of every
	// obs:// URI (a simulator's http://127.0.0.1:PORT/objectstorage);
	// /v1/AUTH_... is appended.
	BaseURL string
	// Identity gets the X-Auth-Token: a static Token, or the user name and
	// API password. An empty TenantID is taken from each URI's AUTH_ account.
	Identity   identity.Config
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of each call, retries included
	// (default 4; 1 disables retries). Every Swift call used here is
	// idempotent, so 429, 5xx and connection errors are retried.
	MaxAttempts int
	// Sleep waits between attempts (default retry.Sleep).
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
}

// ConfigFrom reads a connection map: base_url, identity_url, tenant_id,
// username, password, token (see identity.ConfigFrom).
func ConfigFrom(conn map[string]any) (Config, error) {
	id, err := identity.ConfigFrom(conn)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Identity: id}
	if v, ok := conn["base_url"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return Config{}, fault.Errorf(fault.Invalid, "objectstorage connection: base_url must be a string (got %T)", v)
		}
		cfg.BaseURL = strings.TrimSpace(s)
	}
	return cfg, nil
}

// Client reads and writes objects. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL // nil: https://{host} of each URI
	// objects sends the object calls: without base, the host is the
	// playbook's (its URI), so the destination policy checks it
	// (internal/egress); with base, cfg.HTTPClient.
	objects *http.Client

	mu      sync.Mutex
	sources map[string]*identity.Source // by tenant ("" when Identity names one)
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Identity.HTTPClient == nil {
		cfg.Identity.HTTPClient = cfg.HTTPClient
	}
	c := &Client{cfg: cfg, sources: map[string]*identity.Source{}, objects: cfg.HTTPClient}
	if cfg.BaseURL != "" {
		u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fault.Errorf(fault.Invalid, "objectstorage: base_url must be an http(s) URL with a host (got %q)", cfg.BaseURL)
		}
		c.base = u
	} else {
		checked := *cfg.HTTPClient
		checked.Transport = egress.NewTransport()
		c.objects = &checked
	}
	if cfg.Identity.Token == "" {
		if cfg.Identity.Username == "" || cfg.Identity.Password == "" {
			return nil, fault.Errorf(fault.Invalid, "objectstorage: give a token, or username and password (the storage account's user and API password)")
		}
		if cfg.Identity.TenantID != "" {
			if _, err := c.source(""); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// source returns the token source for tenant ("" when the config names the
// tenant or holds a static token).
func (c *Client) source(tenant string) (*identity.Source, error) {
	if c.cfg.Identity.Token != "" || c.cfg.Identity.TenantID != "" {
		tenant = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sources[tenant]; ok {
		return s, nil
	}
	cfg := c.cfg.Identity
	if tenant != "" {
		cfg.TenantID = tenant
	}
	s, err := identity.New(cfg)
	if err != nil {
		return nil, err
	}
	c.sources[tenant] = s
	return s, nil
}

// objectURL is the request URL of u (the container when object is empty).
func (c *Client) objectURL(u URI, object string) string {
	segs := []string{"v1", url.PathEscape(u.Account), url.PathEscape(u.Container)}
	if object != "" {
		for _, s := range strings.Split(object, "/") {
			segs = append(segs, url.PathEscape(s))
		}
	}
	p := "/" + strings.Join(segs, "/")
	if c.base != nil {
		return c.base.String() + p
	}
	return "https://" + u.Host + p
}

// request describes one call.
type request struct {
	method string
	u      URI
	object string
	query  url.Values
	header http.Header
	// body opens the request body afresh for each attempt (nil: none).
	body func() (io.ReadCloser, error)
	size int64
}

func (r request) op() string {
	s := r.method + " " + r.u.Account + "/" + r.u.Container
	if r.object != "" {
		s += "/" + r.object
	}
	return s
}

// do sends req; it returns a response with a 2xx or 304 status whose body
// the caller closes. ok(status) may accept other statuses (a 404 that is
// an answer). read, when not nil, reads the answer within the attempt (a
// download checked against its ETag), so that a transfer cut short or
// corrupted is sent again; the response's body is then already closed.
func (c *Client) do(ctx context.Context, req request, ok func(int) bool, read func(*http.Response) error) (*http.Response, error) {
	op := "objectstorage: " + req.op()
	src, err := c.source(req.u.Tenant())
	if err != nil {
		return nil, err
	}
	target := c.objectURL(req.u, req.object)
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}
	return httpcall.Do(ctx, c.policy(src), httpcall.Call{
		Op:      op,
		Request: func(ctx context.Context) (*http.Request, error) { return c.request(ctx, op, target, req, src) },
		Accept: func(status int) bool {
			return status == http.StatusNotModified || (ok != nil && ok(status))
		},
		Read:   read,
		Failed: func(resp *http.Response, raw []byte) error { return statusError(op, resp.StatusCode, raw) },
	})
}

// policy is how calls are repeated: every Swift call used here is
// idempotent (GET, HEAD, and PUT of a container or of an object whose
// ETag the server checks: a repeat stores the same bytes), so 429, 5xx and
// connection failures are all retried. A 401 gets one fresh token from
// the tenant's source (a static token is not resent).
func (c *Client) policy(src *identity.Source) httpcall.Policy {
	return httpcall.Policy{
		Attempts: c.cfg.MaxAttempts, Backoff: baseBackoff, MaxBackoff: maxBackoff, MaxRetryAfter: maxRetryAfter,
		Repeat: httpcall.Always, Refresh: httpcall.RefreshToken(src, "X-Auth-Token"),
		Client: c.objects, Sleep: c.cfg.Sleep, Now: c.cfg.Now,
	}
}

// request builds one attempt of req, its body opened afresh.
func (c *Client) request(ctx context.Context, op, target string, req request, src *identity.Source) (*http.Request, error) {
	token, err := src.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var body io.ReadCloser
	if req.body != nil {
		if body, err = req.body(); err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: op + ": reading the local file", Err: err}
		}
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, &fault.Error{Code: fault.Invalid, Message: op, Err: err}
	}
	if body != nil {
		hr.ContentLength = req.size
		if req.size == 0 {
			hr.Body = http.NoBody
			body.Close()
		}
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	hr.Header.Set("X-Auth-Token", token)
	return hr, nil
}

// statusError classifies an unexpected status.
func statusError(op string, status int, raw []byte) error {
	msg := swiftMessage(raw)
	hint := ""
	switch status {
	case http.StatusUnauthorized:
		hint = "; the token was refused: check the connection's username, API password and tenant"
	case http.StatusForbidden:
		hint = "; the user may not access this account or container"
	case http.StatusNotFound:
		hint = "; no such container or object"
	case http.StatusUnprocessableEntity:
		hint = "; the stored data did not match the ETag sent (corrupted in transit)"
	}
	code := fault.CodeForHTTPStatus(status)
	if status == http.StatusUnprocessableEntity {
		code = fault.Unavailable // a transfer error: trying again may succeed
	}
	return &fault.Error{Code: code, Data: map[string]any{"http_status": status},
		Message: fmt.Sprintf("%s: HTTP %d%s%s", op, status, msg, hint)}
}

// swiftMessage extracts readable text from an error body (Swift answers
// small HTML pages or plain text).
func swiftMessage(raw []byte) string {
	s := string(raw)
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
			b.WriteByte(' ')
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	t := strings.Join(strings.Fields(b.String()), " ")
	if len(t) > 300 {
		t = t[:300] + "…"
	}
	if t == "" {
		return ""
	}
	return ": " + t
}

// Info describes a stored object.
type Info struct {
	Name         string
	Bytes        int64
	ETag         string // hex MD5 (quoted and not an MD5 for large-object manifests)
	ContentType  string
	LastModified string
}

// Head reads an object's metadata; found is false for a missing object.
func (c *Client) Head(ctx context.Context, u URI) (Info, bool, error) {
	resp, err := c.do(ctx, request{method: http.MethodHead, u: u, object: u.Object}, func(s int) bool { return s == http.StatusNotFound }, nil)
	if err != nil {
		return Info{}, false, err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return Info{}, false, nil
	}
	return infoOf(u.Object, resp), true, nil
}

func infoOf(name string, resp *http.Response) Info {
	n, _ := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	return Info{Name: name, Bytes: n, ETag: resp.Header.Get("ETag"), ContentType: resp.Header.Get("Content-Type"),
		LastModified: resp.Header.Get("Last-Modified")}
}

// ContainerExists reports whether u's container exists.
func (c *Client) ContainerExists(ctx context.Context, u URI) (bool, error) {
	resp, err := c.do(ctx, request{method: http.MethodHead, u: u}, func(s int) bool { return s == http.StatusNotFound }, nil)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusNotFound, nil
}

// CreateContainer creates u's container (nothing happens when it exists).
func (c *Client) CreateContainer(ctx context.Context, u URI) error {
	resp, err := c.do(ctx, request{method: http.MethodPut, u: u, body: emptyBody}, nil, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func emptyBody() (io.ReadCloser, error) { return http.NoBody, nil }

// List returns every object below u's prefix (u.Object; the whole
// container when empty), paging with marker.
func (c *Client) List(ctx context.Context, u URI) ([]Info, error) {
	var out []Info
	marker := ""
	for {
		q := url.Values{"format": {"json"}, "limit": {strconv.Itoa(listPage)}}
		if u.Object != "" {
			q.Set("prefix", u.Object)
		}
		if marker != "" {
			q.Set("marker", marker)
		}
		resp, err := c.do(ctx, request{method: http.MethodGet, u: u, query: q, header: http.Header{"Accept": {"application/json"}}}, nil, nil)
		if err != nil {
			return nil, err
		}
		var page []struct {
			Name         string `json:"name"`
			Hash         string `json:"hash"`
			Bytes        int64  `json:"bytes"`
			ContentType  string `json:"content_type"`
			LastModified string `json:"last_modified"`
			Subdir       string `json:"subdir"`
		}
		var derr error
		if resp.StatusCode != http.StatusNoContent {
			derr = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&page)
		}
		resp.Body.Close()
		if derr != nil {
			return nil, &fault.Error{Code: fault.Unavailable, Message: "objectstorage: listing " + u.String() + ": the answer is not a JSON listing", Err: derr}
		}
		for _, e := range page {
			if e.Name == "" {
				continue
			}
			out = append(out, Info{Name: e.Name, Bytes: e.Bytes, ETag: e.Hash, ContentType: e.ContentType, LastModified: e.LastModified})
		}
		if len(page) < listPage {
			return out, nil
		}
		last := page[len(page)-1]
		marker = last.Name
		if marker == "" {
			marker = last.Subdir
		}
	}
}
